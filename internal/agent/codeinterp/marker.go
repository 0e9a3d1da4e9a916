package codeinterp

import (
	"bytes"
	"unicode/utf8"
)

// markerReader splits a kernel's output stream into the text of the
// running execution and the end marker the kernel prints after it. Text is
// released as soon as it cannot be part of a marker or of a UTF-8
// sequence cut by a read, so output streams while the code runs.
type markerReader struct {
	marker []byte
	buf    []byte
}

// feed adds bytes read from the stream. It returns the text that can be
// emitted, and, when a marker line ended, what followed the marker on it
// (found reports whether one did; text after that line stays buffered).
func (m *markerReader) feed(p []byte) (text []byte, rest string, found bool) {
	m.buf = append(m.buf, p...)
	if i := bytes.Index(m.buf, m.marker); i >= 0 {
		if nl := bytes.IndexByte(m.buf[i:], '\n'); nl >= 0 {
			text = bytes.Clone(m.buf[:i])
			rest = string(m.buf[i+len(m.marker) : i+nl])
			m.buf = bytes.Clone(m.buf[i+nl+1:])
			return text, rest, true
		}
		text = bytes.Clone(m.buf[:i])
		m.buf = bytes.Clone(m.buf[i:])
		return text, "", false
	}
	keep := partialSuffix(m.buf, m.marker)
	cut := len(m.buf) - keep
	cut -= incompleteRune(m.buf[:cut])
	text = bytes.Clone(m.buf[:cut])
	m.buf = bytes.Clone(m.buf[cut:])
	return text, "", false
}

// partialSuffix is the length of the longest suffix of b that is a proper
// prefix of marker.
func partialSuffix(b, marker []byte) int {
	for n := min(len(b), len(marker)-1); n > 0; n-- {
		if bytes.HasPrefix(marker, b[len(b)-n:]) {
			return n
		}
	}
	return 0
}

// incompleteRune is the number of trailing bytes of b that begin a UTF-8
// sequence a later read will complete.
func incompleteRune(b []byte) int {
	for n := 1; n <= min(len(b), utf8.UTFMax-1); n++ {
		c := b[len(b)-n]
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-n:]) {
				return n
			}
			return 0
		}
	}
	return 0
}
