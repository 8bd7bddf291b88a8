package jit

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// The GCC 12 include shim. Debian's riscv64-unknown-elf-g++ is GCC 12; two
// tt-llk headers of the pinned release (TTMetalRelease) use constructs it
// rejects although later compilers (the SFPI compiler among them) accept
// them:
//
//   - static_assert(false, ...) in a discarded if-constexpr branch of a
//     function template (sfpu/ckernel_sfpu_reduce.h get_instruction_mode):
//     GCC 12 evaluates the non-dependent condition when it parses the
//     template (C++23's P2593 makes it a check at instantiation);
//   - #pragma GCC unroll with a template parameter as its argument
//     (sfpu/ckernel_sfpu_rounding_ops.h _calculate_stochastic_round_):
//     GCC 12 wants an integer constant when it parses the template.
//
// Every compute kernel includes both through ckernel_sfpu.h. Rather than
// edit the tree, a stock-GCC compute build gets a shim directory, written
// into its own build directory from the tree's header text, and placed on
// the include path just before the directory the headers come from. The
// shim holds the two headers rewritten (a dependent false, the parameter's
// default as the unroll count) and, because a quoted include is looked up
// first in the including file's own directory, a copy of every header of
// that directory that reaches them by such a lookup (ckernel_sfpu.h,
// cmath_common.h); in a copy, every other quoted include found next to the
// original names the original by its absolute path, so each copy includes
// exactly what the original does.

// gcc12ShimRoot is the include directory (relative to the tree) whose
// headers the shim shadows, gcc12ShimHeaders the headers it rewrites
// (relative to that directory).
const gcc12ShimRoot = "tt_metal/third_party/tt_llk/tt_llk_blackhole/common/inc"

var gcc12ShimHeaders = []string{"sfpu/ckernel_sfpu_reduce.h", "sfpu/ckernel_sfpu_rounding_ops.h"}

// shimDirName is the shim's directory inside a kernel build directory.
const shimDirName = "gcc12-shim"

var (
	quotedIncludeRE = regexp.MustCompile(`(?m)^([ \t]*#[ \t]*include[ \t]*)"([^"]+)"`)
	staticAssertRE  = regexp.MustCompile(`static_assert\s*\(\s*false\s*,`)
	pragmaUnrollRE  = regexp.MustCompile(`(?m)^([ \t]*#[ \t]*pragma[ \t]+GCC[ \t]+unroll[ \t]+)([A-Za-z_]\w*)[ \t]*$`)
	templateRE      = regexp.MustCompile(`(?m)^[ \t]*template[ \t]*<`)
)

// dependentFalse defines the dependent false the static_assert rewrite
// uses, once per translation unit.
const dependentFalse = `#ifndef TCC_JIT_SHIM_DEPENDENT_FALSE
#define TCC_JIT_SHIM_DEPENDENT_FALSE
namespace tcc_jit_shim {
template <class...> inline constexpr bool dependent_false_t = false;
template <auto...> inline constexpr bool dependent_false_v = false;
}  // namespace tcc_jit_shim
#endif
`

var shims sync.Map // tree -> shimResult

type shimResult struct {
	files map[string]string
	err   error
}

// gcc12Shim returns the shim's files for tree: path relative to the shim
// directory -> contents; none when the tree's headers need no rewrite.
// Results are memoized per process.
func gcc12Shim(tree string) (map[string]string, error) {
	if v, ok := shims.Load(tree); ok {
		r := v.(shimResult)
		return r.files, r.err
	}
	files, err := buildGCC12Shim(filepath.Join(tree, gcc12ShimRoot), gcc12ShimHeaders)
	if err != nil {
		err = fmt.Errorf("jit: GCC 12 include shim for %s: %w", tree, err)
	}
	shims.Store(tree, shimResult{files, err})
	return files, err
}

// buildGCC12Shim shadows headers (relative to root) that hold a construct
// GCC 12 rejects, and every header under root that includes a shadowed one
// through its own directory.
func buildGCC12Shim(root string, headers []string) (map[string]string, error) {
	rewritten := map[string]string{}
	for _, h := range headers {
		b, err := os.ReadFile(filepath.Join(root, h))
		if os.IsNotExist(err) {
			continue // a tree without the header needs no rewrite of it
		}
		if err != nil {
			return nil, err
		}
		text, changed, err := rewriteGCC12(string(b))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", h, err)
		}
		if changed {
			rewritten[h] = text
		}
	}
	if len(rewritten) == 0 {
		return nil, nil
	}
	// includes[f] are the headers under root f reaches by a quoted
	// include resolved in its own directory.
	includes := map[string][]string{}
	texts := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !isSource(p) {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		texts[rel] = string(b)
		for _, m := range quotedIncludeRE.FindAllStringSubmatch(string(b), -1) {
			if t, ok := localInclude(root, rel, m[2]); ok {
				includes[rel] = append(includes[rel], t)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	shadow := map[string]bool{}
	for h := range rewritten {
		shadow[h] = true
	}
	for grew := true; grew; {
		grew = false
		for _, f := range slices.Sorted(maps.Keys(includes)) {
			if shadow[f] {
				continue
			}
			for _, t := range includes[f] {
				if shadow[t] {
					shadow[f], grew = true, true
					break
				}
			}
		}
	}
	out := map[string]string{}
	for f := range shadow {
		text := texts[f]
		if r, ok := rewritten[f]; ok {
			text = r
		}
		out[f] = pinIncludes(root, f, text, shadow)
	}
	return out, nil
}

func isSource(p string) bool {
	switch filepath.Ext(p) {
	case ".h", ".hpp", ".hh", ".inc", ".ipp", ".tpp":
		return true
	}
	return false
}

// localInclude resolves `#include "inc"` of file rel (relative to root)
// in rel's own directory: the target relative to root, if it exists
// there and lies under root.
func localInclude(root, rel, inc string) (string, bool) {
	if filepath.IsAbs(inc) {
		return "", false
	}
	t := filepath.Clean(filepath.Join(filepath.Dir(rel), inc))
	if t == ".." || strings.HasPrefix(t, "../") {
		return "", false
	}
	if st, err := os.Stat(filepath.Join(root, t)); err != nil || st.IsDir() {
		return "", false
	}
	return t, true
}

// pinIncludes makes the copy of f include what the original does: a
// quoted include found next to the original names it by absolute path,
// unless that header is shadowed too (the copy's own directory in the
// shim then holds its copy).
func pinIncludes(root, f, text string, shadow map[string]bool) string {
	return quotedIncludeRE.ReplaceAllStringFunc(text, func(s string) string {
		m := quotedIncludeRE.FindStringSubmatch(s)
		t, ok := localInclude(root, f, m[2])
		if !ok || shadow[t] {
			return s
		}
		return m[1] + `"` + filepath.Join(root, t) + `"`
	})
}

// rewriteGCC12 rewrites the two constructs GCC 12 rejects in a header's
// text; changed says whether there was one.
func rewriteGCC12(text string) (string, bool, error) {
	var b strings.Builder
	changed, last := false, 0
	for _, loc := range staticAssertRE.FindAllStringIndex(text, -1) {
		params, err := templateParams(text, loc[0])
		if err != nil {
			return "", false, fmt.Errorf("static_assert(false) at byte %d: %w", loc[0], err)
		}
		p := params[0]
		cond := "::tcc_jit_shim::dependent_false_v<" + p.name + ">"
		if p.isType {
			cond = "::tcc_jit_shim::dependent_false_t<" + p.name + ">"
		}
		b.WriteString(text[last:loc[0]])
		b.WriteString("static_assert(" + cond + ",")
		last, changed = loc[1], true
	}
	b.WriteString(text[last:])
	text = b.String()
	b.Reset()
	last = 0
	for _, m := range pragmaUnrollRE.FindAllStringSubmatchIndex(text, -1) {
		params, err := templateParams(text, m[0])
		if err != nil {
			continue // not in a template: GCC 12 takes a constant's name
		}
		name := text[m[4]:m[5]]
		i := slices.IndexFunc(params, func(p templateParam) bool { return p.name == name })
		if i < 0 {
			continue
		}
		b.WriteString(text[last:m[0]])
		if d := params[i].def; d != "" {
			b.WriteString(text[m[2]:m[3]] + d + " // tcc jit (GCC 12): " + name + "'s default")
		} else {
			b.WriteString("// tcc jit (GCC 12): dropped " + strings.TrimSpace(text[m[0]:m[1]]) + " (a template parameter without a default)")
		}
		last, changed = m[1], true
	}
	b.WriteString(text[last:])
	text = b.String()
	if changed && strings.Contains(text, "tcc_jit_shim::dependent_false") {
		text = insertAfterPragmaOnce(text, dependentFalse)
	}
	return text, changed, nil
}

// insertAfterPragmaOnce puts s after the header's #pragma once (at the top
// when there is none).
func insertAfterPragmaOnce(text, s string) string {
	const once = "#pragma once\n"
	if i := strings.Index(text, once); i >= 0 {
		i += len(once)
		return text[:i] + s + text[i:]
	}
	return s + text
}

type templateParam struct {
	name   string
	isType bool
	def    string // default argument, "" when none
}

// templateParams parses the parameter list of the nearest template header
// before byte pos.
func templateParams(text string, pos int) ([]templateParam, error) {
	locs := templateRE.FindAllStringIndex(text[:pos], -1)
	if len(locs) == 0 {
		return nil, fmt.Errorf("no enclosing template")
	}
	start := locs[len(locs)-1][1]
	depth, end := 1, -1
	for i := start; i < len(text) && end < 0; i++ {
		switch text[i] {
		case '<':
			depth++
		case '>':
			if depth--; depth == 0 {
				end = i
			}
		}
	}
	if end < 0 {
		return nil, fmt.Errorf("unterminated template parameter list")
	}
	var params []templateParam
	for _, s := range splitTop(text[start:end]) {
		s = strings.TrimSpace(s)
		def := ""
		if i := strings.Index(s, "="); i >= 0 {
			s, def = strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+1:])
		}
		f := strings.Fields(s)
		if len(f) < 2 {
			return nil, fmt.Errorf("template parameter %q has no name", s)
		}
		name := strings.TrimLeft(f[len(f)-1], "&*.")
		params = append(params, templateParam{name: name, isType: f[0] == "typename" || f[0] == "class", def: def})
	}
	if len(params) == 0 {
		return nil, fmt.Errorf("template without parameters")
	}
	return params, nil
}

// splitTop splits a parameter list at its top-level commas.
func splitTop(s string) []string {
	var out []string
	depth, last := 0, 0
	for i, c := range s {
		switch c {
		case '<', '(':
			depth++
		case '>', ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[last:i])
				last = i + 1
			}
		}
	}
	return append(out, s[last:])
}

// writeShim writes files into dir/gcc12-shim and returns that directory;
// "" when there are none.
func writeShim(dir string, files map[string]string) (string, error) {
	if len(files) == 0 {
		return "", nil
	}
	sd := filepath.Join(dir, shimDirName)
	for _, f := range slices.Sorted(maps.Keys(files)) {
		p := filepath.Join(sd, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, []byte(files[f]), 0o644); err != nil {
			return "", err
		}
	}
	return sd, nil
}
