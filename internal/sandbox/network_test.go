package sandbox

import "testing"

func TestValidateEgress(t *testing.T) {
	tests := []struct {
		name    string
		n       Network
		wantErr string // "" = valid
	}{
		{"empty", Network{}, ""},
		{"ips and cidrs", Network{AllowOut: []string{"1.2.3.4", "10.0.0.0/8", "::1", "2001:db8::/32"}, DenyOut: []string{"0.0.0.0/0"}}, ""},
		{"domain", Network{AllowOut: []string{"example.com"}}, "network.allowOut entry 'example.com': domain rules are not supported yet; use an IP address or a CIDR"},
		{"wildcard domain", Network{AllowOut: []string{"*.example.com"}}, "network.allowOut entry '*.example.com': domain rules are not supported yet; use an IP address or a CIDR"},
		{"domain in denyOut", Network{DenyOut: []string{"example.com"}}, "network.denyOut entry 'example.com': domain rules are not supported yet; use an IP address or a CIDR"},
		{"garbage", Network{DenyOut: []string{"1.2.3.4/99"}}, "network.denyOut entry '1.2.3.4/99' is not an IP address or a CIDR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.n.ValidateEgress()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ValidateEgress: %v", err)
				}
				return
			}
			if KindOf(err) != KindInvalid || Message(err) != tt.wantErr {
				t.Fatalf("ValidateEgress = %v, want invalid %q", err, tt.wantErr)
			}
		})
	}
}

func TestParseEgressTarget(t *testing.T) {
	for in, want := range map[string]string{"1.2.3.4": "1.2.3.4/32", "10.1.2.3/8": "10.0.0.0/8", "::ffff:1.2.3.4": "1.2.3.4/32", "fe80::1": "fe80::1/128"} {
		p, err := ParseEgressTarget(in)
		if err != nil || p.String() != want {
			t.Errorf("ParseEgressTarget(%q) = %v, %v; want %s", in, p, err, want)
		}
	}
}
