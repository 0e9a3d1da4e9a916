package api

import (
	"net/url"
	"strings"

	"github.com/warrenhq/warren/internal/sandbox"
)

// parseMetadataQuery decodes the metadata filter of the list endpoints,
// symmetric with the SDK's encoding: the query value (already unescaped
// once by the query parser) is a percent-encoded form string "k=v&k2=v2"
// whose keys and values are form-encoded again. Every pair must have
// exactly one '='. An empty value means no filter.
func parseMetadataQuery(v string) (map[string]string, error) {
	if v == "" {
		return nil, nil
	}
	bad := sandbox.Errorf(sandbox.KindInvalid, "invalid metadata query")
	form, err := url.PathUnescape(v)
	if err != nil {
		return nil, bad
	}
	out := map[string]string{}
	for pair := range strings.SplitSeq(form, "&") {
		parts := strings.Split(pair, "=")
		if len(parts) != 2 {
			return nil, bad
		}
		k, err1 := url.QueryUnescape(parts[0])
		val, err2 := url.QueryUnescape(parts[1])
		if err1 != nil || err2 != nil || k == "" {
			return nil, bad
		}
		out[k] = val
	}
	return out, nil
}
