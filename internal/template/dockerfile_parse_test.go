package template_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/template"
)

func TestParseDockerfile(t *testing.T) {
	spec, warnings, err := template.ParseDockerfile(`FROM warren/base AS x
# a comment
RUN apt-get update \
    && echo done
COPY --chown=user:user --chmod=755 a b /dst
ENV A=1 B="two words"
ENV C three words
WORKDIR /srv
LABEL x=y
CMD ["python", "-m", "http.server"]
`, "h")
	if err != nil {
		t.Fatal(err)
	}
	want := template.BuildSpec{FromImage: "warren/base", StartCmd: `'python' '-m' 'http.server'`, Steps: []template.Step{
		{Type: "USER", Args: []string{"root"}},
		{Type: "WORKDIR", Args: []string{"/"}},
		{Type: "RUN", Args: []string{"apt-get update  && echo done"}},
		{Type: "COPY", Args: []string{"a", "/dst/", "user:user", "755"}, FilesHash: "h"},
		{Type: "COPY", Args: []string{"b", "/dst/", "user:user", "755"}, FilesHash: "h"},
		{Type: "ENV", Args: []string{"A", "1", "B", "two words"}},
		{Type: "ENV", Args: []string{"C", "three words"}},
		{Type: "WORKDIR", Args: []string{"/srv"}},
		{Type: "USER", Args: []string{"user"}},
	}}
	if diff := cmp.Diff(want, spec); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
	if len(warnings) != 1 {
		t.Errorf("warnings %v", warnings)
	}
	for _, bad := range []string{"RUN true", "FROM a\nFROM b", "FROM a\nADD https://x/y /y", "FROM a\nCOPY --from=x a b"} {
		if _, _, err := template.ParseDockerfile(bad, ""); err == nil {
			t.Errorf("ParseDockerfile(%q) accepted", bad)
		}
	}
}
