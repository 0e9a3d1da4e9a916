package codeinterp

import (
	"encoding/json"
	"strings"
)

// MIME types with a field of their own in a result (E2B protocol D.2).
const (
	mimeText       = "text/plain"
	mimeHTML       = "text/html"
	mimeMarkdown   = "text/markdown"
	mimeSVG        = "image/svg+xml"
	mimePNG        = "image/png"
	mimeJPEG       = "image/jpeg"
	mimePDF        = "application/pdf"
	mimeLaTeX      = "text/latex"
	mimeJSON       = "application/json"
	mimeJavaScript = "application/javascript"
	mimeData       = "e2b/data"
	mimeChart      = "e2b/chart"
)

// resultLine maps a Jupyter MIME bundle to a result line. Kernels may send
// a string as a list of lines (as notebooks store it); those are joined.
func resultLine(data map[string]any, main bool) Output {
	r := &Result{IsMainResult: main}
	o := Output{Type: typeResult, Result: r}
	for mime, v := range data {
		switch mime {
		case mimeText:
			o.Text = stripQuotes(str(v))
		case mimeHTML:
			r.HTML = str(v)
		case mimeMarkdown:
			r.Markdown = str(v)
		case mimeSVG:
			r.SVG = str(v)
		case mimePNG:
			r.PNG = strings.TrimSpace(str(v))
		case mimeJPEG:
			r.JPEG = strings.TrimSpace(str(v))
		case mimePDF:
			r.PDF = strings.TrimSpace(str(v))
		case mimeLaTeX:
			r.LaTeX = str(v)
		case mimeJSON:
			r.JSON = v
		case mimeJavaScript:
			r.JavaScript = str(v)
		case mimeData:
			r.Data = v
		case mimeChart:
			r.Chart = v
		default:
			if r.Extra == nil {
				r.Extra = map[string]any{}
			}
			r.Extra[mime] = v
		}
	}
	return o
}

func str(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []any:
		var b strings.Builder
		for _, line := range v {
			s, _ := line.(string)
			b.WriteString(s)
		}
		return b.String()
	case nil:
		return ""
	}
	raw, _ := json.Marshal(v)
	return string(raw)
}

// stripQuotes turns a string's repr ('abc' or "abc") into the text itself,
// as E2B's clients expect of text/plain.
func stripQuotes(s string) string {
	if len(s) >= 2 && (s[0] == '\'' || s[0] == '"') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}
