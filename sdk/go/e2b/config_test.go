package e2b

import (
	"testing"
	"time"
)

func TestConfigFromEnvironment(t *testing.T) {
	t.Setenv("E2B_API_KEY", "e2b_1")
	t.Setenv("E2B_API_URL", "http://127.0.0.1:1/")
	t.Setenv("E2B_SANDBOX_URL", "")
	t.Setenv("E2B_DOMAIN", "example.test")
	t.Setenv("E2B_ACCESS_TOKEN", "sk_e2b_2")
	t.Setenv("E2B_DEBUG", "")
	cfg := NewClient(WithRequestTimeout(time.Second)).Config()
	if cfg.APIKey != "e2b_1" || cfg.APIURL != "http://127.0.0.1:1" || cfg.Domain != "example.test" || cfg.AccessToken != "sk_e2b_2" ||
		cfg.RequestTimeout != time.Second || cfg.Retries != DefaultRetries {
		t.Errorf("config %+v", cfg)
	}
	if cfg := NewClient(WithAPIKey("e2b_3"), WithAPIURL("")).Config(); cfg.APIKey != "e2b_3" || cfg.APIURL != "https://api.example.test" {
		t.Errorf("options over the environment: %+v", cfg)
	}
}

func TestSandboxURLs(t *testing.T) {
	for _, tc := range []struct {
		name           string
		cfg            Config
		domain         string
		envd, download string
	}{
		{"own domain", Config{}, "example.test", "https://49983-sb1.example.test", "https://49983-sb1.example.test"},
		{"E2B's shared host", Config{}, "e2b.app", "https://sandbox.e2b.app", "https://49983-sb1.e2b.app"},
		{"sandbox URL", Config{SandboxURL: "http://127.0.0.1:3000"}, "e2b.app", "http://127.0.0.1:3000", "http://127.0.0.1:3000"},
		{"debug", Config{Debug: true}, "example.test", "http://localhost:49983", "http://localhost:49983"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.cfg.envdURL("sb1", tc.domain); got != tc.envd {
				t.Errorf("envd URL %s, want %s", got, tc.envd)
			}
			if got := tc.cfg.directURL("sb1", tc.domain, envdPort); got != tc.download {
				t.Errorf("direct URL %s, want %s", got, tc.download)
			}
		})
	}
}

func TestVersionBefore(t *testing.T) {
	for _, tc := range []struct {
		v, min string
		want   bool
	}{
		{"0.3.9", "0.4.0", true}, {"0.4.0", "0.4.0", false}, {"0.6.13", "0.5.7", false},
		{"v0.1.0-rc1", "0.1.4", true}, {"nonsense", "0.4.0", false}, {"1.0.0", "0.9.9", false},
	} {
		if got := versionBefore(tc.v, tc.min); got != tc.want {
			t.Errorf("versionBefore(%s, %s) = %v", tc.v, tc.min, got)
		}
	}
}

func TestEscapeComponentAsJavaScript(t *testing.T) {
	if got := escapeComponent("a b&c=d/é~*'()"); got != "a%20b%26c%3Dd%2F%C3%A9~*'()" {
		t.Errorf("got %s", got)
	}
}
