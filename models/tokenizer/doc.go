// Package tokenizer reads a Hugging Face tokenizer.json and turns text into
// token ids and back, as Hugging Face's tokenizers library (Rust; what
// transformers' fast tokenizers run) does for the byte-level BPE tokenizers
// Qwen2 and Qwen3 ship.
//
// The pipeline of Encode, each step as the Rust library does it:
//
//  1. added tokens (added_tokens[]) are split off first: those with
//     "normalized": false on the raw text, the others after normalisation;
//     at each position the leftmost, then longest, added token matches
//     (lstrip, rstrip and single_word as the library applies them);
//  2. the normalizer: NFC, NFD, NFKC, NFKD or a Sequence of them
//     (golang.org/x/text/unicode/norm);
//  3. the pre-tokenizer: Split (a regex or a literal, every split
//     behaviour, invert), ByteLevel (the 256 byte symbols of GPT-2's
//     bytes_to_unicode; add_prefix_space; use_regex with GPT-2's regex) or a
//     Sequence of them. Patterns are Oniguruma regexes in the file; they run
//     on github.com/dlclark/regexp2 (backtracking, with lookahead: Qwen's
//     `\s+(?!\S)`), whose case folding and \s, \p{L}, \p{N} classes agree
//     with Oniguruma's on the reference vectors (testdata/qwen-synth);
//  4. the model: BPE (vocab, merges as "a b" strings or [a, b] pairs,
//     applied lowest rank first and leftmost first among equal ranks;
//     ignore_merges, unk_token, fuse_unk, byte_fallback,
//     continuing_subword_prefix and end_of_word_suffix; dropout must be
//     null or 0: it is random).
//
// Added tokens get the ids the Rust library gives them: a content already
// in the model's vocab keeps its vocab id, the others are numbered from the
// vocab's size on in file order (the file's own "id" fields are not read,
// as the library only warns when they differ).
//
// Decode maps ids to tokens (added tokens by content, skipped when special
// and skipSpecial), and the ByteLevel decoder turns the byte symbols back
// into bytes (a token with any other character is taken as its UTF-8
// bytes); invalid UTF-8 becomes U+FFFD per maximal invalid subpart, as
// Rust's String::from_utf8_lossy does. A Stream decodes token by token and
// hands out only whole characters, holding back the bytes of a character
// that later tokens complete; what it hands out, then Flush, is Decode of
// all the ids.
//
// Other components (WordPiece or Unigram models, Metaspace, template post
// processors, ...) are refused by Parse, naming the component.
//
// Config reads tokenizer_config.json and generation_config.json beside the
// tokenizer for the end-of-sequence tokens and the chat template; ChatML
// formats one user turn as Qwen's chat template does.
//
// testdata/qwen-synth holds a small Qwen-style tokenizer and vectors made
// with the Rust library (see its README.md); the tests reproduce every one.
package tokenizer
