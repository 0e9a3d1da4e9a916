package codeinterp

import (
	"errors"
	"strings"
	"testing"
)

func TestParseExecute(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		lang    string
		wantErr bool
	}{
		{"minimal", `{"code":"1"}`, "", false},
		{"language alias", `{"code":"1","language":"TS"}`, langTypeScript, false},
		{"sdk nulls", `{"code":"1","context_id":null,"language":null,"env_vars":null}`, "", false},
		{"both", `{"code":"1","context_id":"x","language":"python"}`, "", true},
		{"unknown language", `{"code":"1","language":"cobol"}`, "", true},
		{"env name", `{"code":"1","env_vars":{"1A":"x"}}`, "", true},
		{"not json", `code=1`, "", true},
		{"empty", ``, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := parseExecute(strings.NewReader(tt.body))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, errBadRequest) && !errors.Is(err, errUnsupportedLanguage) {
				t.Fatalf("error %v is neither a bad request nor an unsupported language", err)
			}
			if err == nil && req.Language != tt.lang {
				t.Fatalf("language %q, want %q", req.Language, tt.lang)
			}
		})
	}
}

func FuzzParseExecute(f *testing.F) {
	for _, s := range []string{
		`{"code":"1"}`, `{"code":"x","context_id":"c","env_vars":{"A":"b"}}`,
		`{"code":"","language":"js","env_vars":{"A_1":"\u0000"}}`, `[]`, `{"code":1}`, ``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		req, err := parseExecute(strings.NewReader(body))
		if err != nil {
			if !errors.Is(err, errBadRequest) && !errors.Is(err, errUnsupportedLanguage) {
				t.Fatalf("error %v is neither a bad request nor an unsupported language", err)
			}
			return
		}
		if req.ContextID != "" && req.Language != "" {
			t.Fatal("accepted both context_id and language")
		}
		if req.Language != "" {
			if _, ok := normalizeLanguage(req.Language); !ok {
				t.Fatalf("accepted language %q", req.Language)
			}
		}
		for name := range req.EnvVars {
			if !validEnvName(name) {
				t.Fatalf("accepted env var name %q", name)
			}
			// Every language's code must be buildable from accepted vars.
			for _, lang := range []string{langPython, langJavaScript, langBash, langR} {
				if envOverrideCode(lang, req.EnvVars) == "" || envRestoreCode(lang, req.EnvVars) == "" {
					t.Fatalf("no env code for %s", lang)
				}
			}
		}
	})
}
