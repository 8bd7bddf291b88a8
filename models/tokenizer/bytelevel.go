package tokenizer

import "strings"

// byteChar[b] is the character GPT-2's bytes_to_unicode gives byte b: the
// printable Latin-1 bytes stand for themselves, the other 68 bytes (0-32,
// 127-160, 173) for U+0100 on, in byte order. charByte is its inverse.
var (
	byteChar [256]rune
	charByte = map[rune]byte{}
)

// byteOrder lists the bytes in bytes_to_unicode's order (the printable
// ones first), the order of ids 0-255 in GPT-2's and Qwen's vocabularies.
var byteOrder []byte

func init() {
	printable := func(b int) bool {
		return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
	}
	n := 0
	for b := 0; b < 256; b++ {
		if printable(b) {
			byteChar[b] = rune(b)
			byteOrder = append(byteOrder, byte(b))
		}
	}
	for b := 0; b < 256; b++ {
		if !printable(b) {
			byteChar[b] = rune(256 + n)
			byteOrder = append(byteOrder, byte(b))
			n++
		}
	}
	for b, r := range byteChar {
		charByte[r] = byte(b)
	}
}

// byteLevel returns s with every byte replaced by its character.
func byteLevel(s string) string {
	var sb strings.Builder
	sb.Grow(2 * len(s))
	for i := 0; i < len(s); i++ {
		sb.WriteRune(byteChar[s[i]])
	}
	return sb.String()
}

// tokenBytes appends the bytes token stands for under the ByteLevel
// decoder: each character's byte, or, when any character is not a byte
// symbol (an added token such as "<think>" is, one with other characters
// is not), the token's own UTF-8 bytes.
func tokenBytes(dst []byte, token string) []byte {
	n := len(dst)
	for _, r := range token {
		b, ok := charByte[r]
		if !ok {
			return append(dst[:n], token...)
		}
		dst = append(dst, b)
	}
	return dst
}

// ByteSymbol returns the vocabulary symbol of byte b under the ByteLevel
// pre-tokenizer ("Ġ" for a space, "Ċ" for a newline).
func ByteSymbol(b byte) string { return string(byteChar[b]) }
