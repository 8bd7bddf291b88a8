package tokenizer

import "unicode/utf8"

// nextRune measures the UTF-8 sequence at the start of b (not empty). A
// valid character returns its size and valid. An invalid one returns the
// length of its maximal subpart (the longest prefix of a valid sequence,
// at least 1 byte: Unicode's "substitution of maximal subparts", which
// Rust's String::from_utf8_lossy follows). A valid prefix that b ends in
// the middle of returns incomplete with n = len(b).
func nextRune(b []byte) (n int, valid, incomplete bool) {
	c := b[0]
	if c < 0x80 {
		return 1, true, false
	}
	var need int
	lo, hi := byte(0x80), byte(0xBF) // range of the second byte
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default: // 0x80-0xC1, 0xF5-0xFF never start a character
		return 1, false, false
	}
	for i := 1; i <= need; i++ {
		if i == len(b) {
			return i, false, true
		}
		if b[i] < lo || b[i] > hi {
			return i, false, false
		}
		lo, hi = 0x80, 0xBF
	}
	return need + 1, true, false
}

// lossy returns b as valid UTF-8, each maximal invalid subpart (and an
// incomplete sequence at the end) replaced by U+FFFD.
func lossy(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out, _ := lossyPrefix(b, true)
	return out
}

// lossyPrefix decodes b as lossy does, stopping before an incomplete
// sequence at the end unless final; it returns the text and the number of
// bytes consumed.
func lossyPrefix(b []byte, final bool) (string, int) {
	out := make([]byte, 0, len(b)+8)
	i := 0
	for i < len(b) {
		n, valid, incomplete := nextRune(b[i:])
		if incomplete && !final {
			break
		}
		if valid {
			out = append(out, b[i:i+n]...)
		} else {
			out = utf8.AppendRune(out, utf8.RuneError)
		}
		i += n
	}
	return string(out), i
}

// validString returns s unchanged when it is valid UTF-8 and otherwise
// with its invalid bytes replaced as lossy does: the Rust library's input
// is a Rust string, always valid.
func validString(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return lossy([]byte(s))
}
