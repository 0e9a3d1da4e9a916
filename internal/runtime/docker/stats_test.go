package docker

import "testing"

func TestStorageSize(t *testing.T) {
	tests := []struct {
		opt  string
		want int64
	}{
		{"10240M", 10240 << 20},
		{"64M", 64 << 20},
		{"", 0},
		{"10G", 0}, // not how Create writes it
		{"M", 0},
		{"-5M", 0},
	}
	for _, tt := range tests {
		t.Run(tt.opt, func(t *testing.T) {
			if got := storageSize(tt.opt); got != tt.want {
				t.Errorf("storageSize(%q) = %d, want %d", tt.opt, got, tt.want)
			}
		})
	}
}
