package httpedge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Reader reads JSON request bodies. Every error it returns is KindInvalid
// with a message for the client that speaks JSON rather than Go, naming
// fields by their JSON path; a body over Limit is 413 (Status).
type Reader struct {
	// Limit is the largest body it reads, in bytes; required.
	Limit int64
	// Strict refuses a member the value has no field for; false ignores
	// it, as E2B does.
	Strict bool
}

// Decode reads an optional JSON body into v: an empty body leaves v as
// it is. Anything after the JSON value but whitespace is refused.
func (rd Reader) Decode(r *http.Request, v any) error {
	_, err := rd.read(r, v)
	return err
}

// DecodeRequired is Decode for endpoints whose body is required; example
// shows the client the smallest body that works.
func (rd Reader) DecodeRequired(r *http.Request, v any, example string) error {
	empty, err := rd.read(r, v)
	if err == nil && empty {
		err = sandbox.Errorf(sandbox.KindInvalid, "invalid request body: the body is empty; send a JSON object such as %s", example)
	}
	return err
}

// read decodes the request's body into v and reports whether it was
// empty (nothing but whitespace).
func (rd Reader) read(r *http.Request, v any) (empty bool, err error) {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, rd.Limit))
	if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
		return false, sandbox.Wrap(sandbox.KindInvalid, err,
			fmt.Sprintf("request body is larger than the limit of %d bytes%s", rd.Limit, inUnits(rd.Limit)))
	}
	if err != nil {
		return false, sandbox.Wrap(sandbox.KindInvalid, err, "cannot read the request body")
	}
	if skipSpace(body, 0) == len(body) {
		return true, nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if rd.Strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return false, jsonError(body, err)
	}
	if off := skipSpace(body, int(dec.InputOffset())); off < len(body) {
		return false, sandbox.Errorf(sandbox.KindInvalid, "invalid request body: unexpected data after the JSON value at offset %d", off)
	}
	return false, nil
}

// inUnits says n bytes in MiB or KiB, in parentheses, when it is a whole
// number of either.
func inUnits(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf(" (%d MiB)", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf(" (%d KiB)", n>>10)
	}
	return ""
}

// skipSpace returns the offset of the first byte at or after off that is
// not JSON whitespace.
func skipSpace(b []byte, off int) int {
	for off < len(b) && strings.IndexByte(" \t\r\n", b[off]) >= 0 {
		off++
	}
	return off
}

// jsonError rewrites an encoding/json error about body into a message
// that speaks JSON rather than Go.
func jsonError(body []byte, err error) error {
	invalid := func(format string, args ...any) error {
		return sandbox.Wrap(sandbox.KindInvalid, err, "invalid request body: "+fmt.Sprintf(format, args...))
	}
	if syn, ok := errors.AsType[*json.SyntaxError](err); ok {
		return invalid("malformed JSON at offset %d: %s", max(syn.Offset-1, 0), syn.Error())
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return invalid("malformed JSON: the body ends at offset %d, in the middle of a value", len(body))
	}
	// encoding/json has no type for an unknown member (Strict).
	if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return invalid("unknown field %s", field)
	}
	te, ok := errors.AsType[*json.UnmarshalTypeError](err)
	if !ok {
		// Decoding into the plain structs handlers use fails only with
		// the errors above; say no more than this about anything else.
		return invalid("cannot decode it")
	}
	path, found := jsonPath(body, te.Offset)
	if !found {
		path = te.Field
	}
	want := jsonKind(te.Type)
	if path == "" {
		return invalid("expected a JSON %s", strings.TrimPrefix(strings.TrimPrefix(want, "an "), "a "))
	}
	if lit, ok := strings.CutPrefix(te.Value, "number "); ok && want == "a number" {
		// A number, but not one the field can hold.
		if f, err := strconv.ParseFloat(lit, 64); err == nil && f != math.Trunc(f) {
			return invalid("%q must be an integer", path)
		}
		return invalid("%q is out of range", path)
	}
	return invalid("%q must be %s", path, want)
}

// jsonKind names the JSON type that decodes into t.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "an object"
	}
}

// jsonPath finds the value of body that ends at offset end (a scalar) or
// opens there (an object or array), as encoding/json reports it, and
// returns its path: object keys joined by dots, array indexes in
// brackets, "" for the top-level value. encoding/json's own path leaves
// out map keys and indexes.
func jsonPath(body []byte, end int64) (string, bool) {
	type frame struct {
		array bool
		key   string // object: the current member's key
		index int    // array: the current element's index
		inKey bool   // object: the next string is a key
	}
	var stack []frame
	path := func() string {
		var b strings.Builder
		for _, f := range stack {
			if f.array {
				fmt.Fprintf(&b, "[%d]", f.index)
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		}
		return b.String()
	}
	// next moves the innermost container past the value just read.
	next := func() {
		if n := len(stack); n > 0 {
			if stack[n-1].array {
				stack[n-1].index++
			} else {
				stack[n-1].inKey = true
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		if n := len(stack); n > 0 && !stack[n-1].array && stack[n-1].inKey {
			if key, ok := tok.(string); ok {
				stack[n-1].key, stack[n-1].inKey = key, false
				continue
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if dec.InputOffset() == end {
				return path(), true
			}
			stack = append(stack, frame{array: tok == json.Delim('['), inKey: tok == json.Delim('{')})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			next()
		default:
			if dec.InputOffset() == end {
				return path(), true
			}
			next()
		}
	}
}
