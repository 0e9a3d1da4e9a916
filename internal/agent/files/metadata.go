package files

import (
	"net/http"
	"strings"

	"github.com/warrenhq/warren/internal/agent/filesystem"
)

// metadataHeader prefixes the request headers that carry file metadata.
const metadataHeader = "X-Metadata-"

// Limits of what one upload may attach, set by what Linux filesystems
// accept: an xattr name is at most 255 bytes including the prefix, and
// ext4 keeps all of a file's xattrs in one 4 KiB block.
const (
	maxMetadataKey   = 255 - len(filesystem.MetadataPrefix)
	maxMetadataTotal = 4096
)

// parseMetadata collects the X-Metadata-* headers, keys lowercased. It
// rejects what could not be stored faithfully: non-printable or non-ASCII
// text, over-long keys, too much in total.
func parseMetadata(h http.Header) (map[string]string, error) {
	var md map[string]string
	total := 0
	for name, values := range h {
		if len(name) <= len(metadataHeader) || !strings.EqualFold(name[:len(metadataHeader)], metadataHeader) {
			continue
		}
		key := strings.ToLower(name[len(metadataHeader):])
		val := strings.Join(values, ", ")
		if !printable(key) {
			return nil, errorf(http.StatusBadRequest, "metadata key '%s' must be printable ASCII", key)
		}
		if !printable(val) {
			return nil, errorf(http.StatusBadRequest, "metadata value of key '%s' must be printable ASCII", key)
		}
		if len(key) > maxMetadataKey {
			return nil, errorf(http.StatusBadRequest, "metadata key '%s' is longer than %d bytes", key, maxMetadataKey)
		}
		total += len(key) + len(val)
		if total > maxMetadataTotal {
			return nil, errorf(http.StatusBadRequest, "metadata is larger than %d bytes in total", maxMetadataTotal)
		}
		if md == nil {
			md = map[string]string{}
		}
		md[key] = val
	}
	return md, nil
}

func printable(s string) bool {
	for i := range len(s) {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
