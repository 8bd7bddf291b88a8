package external

import (
	"fmt"
	"go/constant"
	"go/token"
	"go/types"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/tools/go/packages"

	"github.com/tcc-dev/tcc/passes"
)

// Import paths and names the driver depends on.
const (
	tccModule   = "github.com/tcc-dev/tcc"
	rewritePath = tccModule + "/passes/rewrite"
	passesPath  = tccModule + "/passes"
	// EntryPackage is the package whose Main() int the driver's main runs:
	// the tcc command line.
	EntryPackage = tccModule + "/cmd/tcc/cli"
)

// wantSig is the required declaration, for messages.
const wantSig = "func Rules() []*rewrite.Rule (rewrite = " + rewritePath + ")"

// PkgInfo describes one rule package that passed Inspect.
type PkgInfo struct {
	Path      string // import path
	Name      string // package name
	Dir       string // absolute directory
	Family    string // rule family: the package's Family string constant, else Name
	Module    string // path of the module holding the package
	ModuleDir string // root directory of that module
	// GoVersion is the go directive of that module's go.mod ("" if none).
	GoVersion string
	// TCCDir is the root directory of the github.com/tcc-dev/tcc module the
	// package was type-checked against; the driver is built from it.
	TCCDir string
	// Files are the package's own source files (Go, other, embedded),
	// absolute and sorted.
	Files []string
}

// loadMode is what Inspect needs: names, files and modules of the whole
// import graph (go list -deps) and types of the rule packages, type-checked
// from source so errors carry positions; dependencies come from export data.
const loadMode = packages.NeedName | packages.NeedFiles | packages.NeedEmbedFiles |
	packages.NeedImports | packages.NeedModule | packages.NeedTypes |
	packages.NeedSyntax | packages.NeedTypesInfo

// maxErrors bounds the load errors listed in one message.
const maxErrors = 20

// Inspect loads the packages matching patterns and checks that each is a
// usable rule package. A pattern that is a directory ("./myrules",
// "../elsewhere/rules", an absolute path, optionally ending in "/...") is
// resolved relative to dir and loaded from inside that directory, so a rule
// package in its own module builds with that module's go.mod; other
// patterns (import paths such as "example.com/myrules") are resolved as the
// go command does in dir. Each package must:
//
//   - load and type-check without errors (listed as file:line:col,
//     relative to dir where possible);
//   - not be package main;
//   - declare exactly func Rules() []*rewrite.Rule, with rewrite the
//     package github.com/tcc-dev/tcc/passes/rewrite;
//   - have a valid family name (its optional Family string constant, else
//     the package name) that is not built in (passes.CheckExternalFamily)
//     and not used by another matched package;
//   - build against a tcc module available as source that has the package
//     EntryPackage (PkgInfo.TCCDir).
//
// On success it returns one PkgInfo per package, sorted by import path. On
// failure the error names the package and what was found; no PkgInfo is
// returned.
func Inspect(dir string, patterns ...string) ([]PkgInfo, error) {
	if len(patterns) == 0 {
		return nil, fmt.Errorf("rules: no package patterns given")
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	fset := token.NewFileSet()
	var roots []*packages.Package
	seen := map[string]bool{}
	for _, req := range loadRequests(absDir, patterns) {
		ps, err := load(fset, req, absDir)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			if !seen[p.ID] {
				seen[p.ID] = true
				roots = append(roots, p)
			}
		}
	}
	var infos []PkgInfo
	family := map[string]string{} // family -> package path
	for _, p := range roots {
		info, err := inspectPkg(p, fset, absDir)
		if err != nil {
			return nil, err
		}
		if other, dup := family[info.Family]; dup {
			return nil, fmt.Errorf("rules: packages %s and %s both define rule family %q; declare a different const Family = \"...\" in one of them", other, info.Path, info.Family)
		}
		family[info.Family] = info.Path
		infos = append(infos, info)
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Path < infos[j].Path })
	return infos, nil
}

// loadRequest is one packages.Load: patterns resolved in dir. shown is the
// pattern as the user wrote it, for messages.
type loadRequest struct {
	dir      string
	patterns []string
	shown    string
}

// loadRequests turns each directory pattern into a load from inside that
// directory and groups the other patterns into one load from dir.
func loadRequests(dir string, patterns []string) []loadRequest {
	var reqs []loadRequest
	var others []string
	for _, p := range patterns {
		slashed := filepath.ToSlash(p)
		isDir := filepath.IsAbs(p) || slashed == "." || slashed == ".." || strings.HasPrefix(slashed, "./") || strings.HasPrefix(slashed, "../")
		if !isDir {
			others = append(others, p)
			continue
		}
		pat := "."
		if base, ok := strings.CutSuffix(slashed, "/..."); ok {
			slashed, pat = base, "./..."
		}
		d := filepath.FromSlash(slashed)
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		reqs = append(reqs, loadRequest{dir: d, patterns: []string{pat}, shown: p})
	}
	if len(others) > 0 {
		reqs = append(reqs, loadRequest{dir: dir, patterns: others, shown: strings.Join(others, " ")})
	}
	return reqs
}

// load runs one request and reports its load and type errors.
func load(fset *token.FileSet, req loadRequest, top string) ([]*packages.Package, error) {
	if st, err := os.Stat(req.dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("rules: %s: no such directory (%s)", req.shown, req.dir)
	}
	cfg := &packages.Config{Mode: loadMode, Dir: req.dir, Fset: fset}
	roots, err := packages.Load(cfg, req.patterns...)
	if err != nil {
		return nil, fmt.Errorf("rules: loading %s: %w", req.shown, err)
	}
	if len(roots) == 0 {
		// go/packages hides a failing go list in export mode; ask it again.
		msg := "no packages match"
		cmd := exec.Command("go", append([]string{"list", "-e", "-find", "--"}, req.patterns...)...)
		cmd.Dir = req.dir
		if out, err := cmd.CombinedOutput(); err != nil {
			msg = strings.TrimSpace(string(out))
		}
		return nil, fmt.Errorf("rules: loading %s (in %s): %s", req.shown, req.dir, msg)
	}
	if err := loadErrors(roots, top, req.shown); err != nil {
		return nil, err
	}
	return roots, nil
}

// loadErrors collects the errors of every loaded package (rule packages and
// their dependencies) into one error, or returns nil.
func loadErrors(roots []*packages.Package, dir string, shown string) error {
	var msgs []string
	seen := map[string]bool{}
	packages.Visit(roots, nil, func(p *packages.Package) {
		// With type or parse errors, the go command's failed compile of the
		// same package (a ListError) only repeats them.
		typed := slices.ContainsFunc(p.Errors, func(e packages.Error) bool { return e.Kind != packages.ListError })
		for _, e := range p.Errors {
			if typed && e.Kind == packages.ListError {
				continue
			}
			var m string
			if e.Pos != "" && e.Pos != "-" {
				m = relPos(dir, e.Pos) + ": " + e.Msg
			} else {
				m = p.PkgPath + ": " + e.Msg
			}
			if !seen[m] {
				seen[m] = true
				msgs = append(msgs, m)
			}
		}
	})
	if len(msgs) == 0 {
		return nil
	}
	n := len(msgs)
	if n > maxErrors {
		msgs = append(msgs[:maxErrors], fmt.Sprintf("... and %d more", n-maxErrors))
	}
	return fmt.Errorf("rules: loading %s: %d error(s):\n\t%s", shown, n, strings.Join(msgs, "\n\t"))
}

// relPos rewrites "file:line:col" with file relative to dir when it lies
// under dir.
func relPos(dir, pos string) string {
	if filepath.IsAbs(pos) {
		if rel, err := filepath.Rel(dir, pos); err == nil && !strings.HasPrefix(rel, "..") {
			return rel
		}
	}
	return pos
}

// declPos is obj's position as "file:line", relative to dir when possible.
func declPos(fset *token.FileSet, dir string, obj types.Object) string {
	p := fset.Position(obj.Pos())
	if !p.IsValid() {
		return "?"
	}
	return relPos(dir, fmt.Sprintf("%s:%d", p.Filename, p.Line))
}

func inspectPkg(p *packages.Package, fset *token.FileSet, dir string) (PkgInfo, error) {
	if p.Name == "main" {
		return PkgInfo{}, fmt.Errorf("rules: package %s is package main, which cannot be imported; a rule package must be a library that declares %s", p.PkgPath, wantSig)
	}
	if p.Types == nil {
		return PkgInfo{}, fmt.Errorf("rules: package %s has no type information", p.PkgPath)
	}
	if err := checkRulesFunc(p, fset, dir); err != nil {
		return PkgInfo{}, err
	}
	family, err := familyOf(p, fset, dir)
	if err != nil {
		return PkgInfo{}, err
	}
	info := PkgInfo{Path: p.PkgPath, Name: p.Name, Family: family}
	info.Files = sortedUnique(p.GoFiles, p.OtherFiles, p.EmbedFiles)
	if len(p.GoFiles) > 0 {
		info.Dir = filepath.Dir(p.GoFiles[0])
	}
	if p.Module != nil {
		info.Module, info.ModuleDir, info.GoVersion = p.Module.Path, moduleDir(p.Module), p.Module.GoVersion
	}
	// Find the tcc module the package builds against.
	packages.Visit([]*packages.Package{p}, nil, func(q *packages.Package) {
		if q.PkgPath == rewritePath && q.Module != nil {
			info.TCCDir = moduleDir(q.Module)
		}
	})
	if info.TCCDir == "" {
		return PkgInfo{}, fmt.Errorf("rules: package %s: cannot find the directory of module %s (it is needed as source to build the rule driver; add a replace directive or go.work entry pointing at a tcc checkout)", p.PkgPath, tccModule)
	}
	if st, err := os.Stat(filepath.Join(info.TCCDir, "cmd", "tcc", "cli")); err != nil || !st.IsDir() {
		return PkgInfo{}, fmt.Errorf("rules: package %s builds against tcc in %s, which has no package %s; the rule driver needs a tcc checkout that has it", p.PkgPath, info.TCCDir, EntryPackage)
	}
	return info, nil
}

// checkRulesFunc checks that p declares exactly func Rules() []*rewrite.Rule.
func checkRulesFunc(p *packages.Package, fset *token.FileSet, dir string) error {
	qual := qualifier(p.Types)
	obj := p.Types.Scope().Lookup("Rules")
	if obj == nil {
		hint := ""
		if low := p.Types.Scope().Lookup("rules"); low != nil {
			hint = fmt.Sprintf(" (found unexported %s at %s; export it)", types.ObjectString(low, qual), declPos(fset, dir, low))
		}
		return fmt.Errorf("rules: package %s declares no Rules function%s; a rule package must declare %s", p.PkgPath, hint, wantSig)
	}
	fn, ok := obj.(*types.Func)
	if !ok {
		return fmt.Errorf("rules: package %s: %s: Rules is %s; want %s", p.PkgPath, declPos(fset, dir, obj), types.ObjectString(obj, qual), wantSig)
	}
	sig := fn.Type().(*types.Signature)
	if sig.Params().Len() != 0 || sig.TypeParams().Len() != 0 || sig.Results().Len() != 1 || !isRuleSlice(sig.Results().At(0).Type()) {
		return fmt.Errorf("rules: package %s: %s: Rules has type %s; want %s", p.PkgPath, declPos(fset, dir, obj), types.TypeString(sig, (*types.Package).Name), wantSig)
	}
	return nil
}

// qualifier writes other packages by name and pkg's own objects bare.
func qualifier(pkg *types.Package) types.Qualifier {
	return func(q *types.Package) string {
		if q == pkg {
			return ""
		}
		return q.Name()
	}
}

// isRuleSlice reports whether t is exactly []*rewrite.Rule.
func isRuleSlice(t types.Type) bool {
	s, ok := t.(*types.Slice)
	if !ok {
		return false
	}
	ptr, ok := s.Elem().(*types.Pointer)
	if !ok {
		return false
	}
	n, ok := ptr.Elem().(*types.Named)
	if !ok || n.Obj().Pkg() == nil {
		return false
	}
	return n.Obj().Pkg().Path() == rewritePath && n.Obj().Name() == "Rule" && n.TypeArgs().Len() == 0
}

// familyOf returns the Family string constant, or the package name, after
// checking it can name a new family.
func familyOf(p *packages.Package, fset *token.FileSet, dir string) (string, error) {
	family := p.Name
	if obj := p.Types.Scope().Lookup("Family"); obj != nil {
		c, ok := obj.(*types.Const)
		if !ok || c.Val().Kind() != constant.String {
			return "", fmt.Errorf("rules: package %s: %s: Family is %s; want a string constant, e.g. const Family = \"mine\"", p.PkgPath, declPos(fset, dir, obj), types.ObjectString(obj, qualifier(p.Types)))
		}
		family = constant.StringVal(c.Val())
	}
	if err := passes.CheckExternalFamily(family); err != nil {
		return "", fmt.Errorf("rules: package %s: %w; choose its family with const Family = \"name\"", p.PkgPath, err)
	}
	return family, nil
}

// moduleDir is the directory holding m's files (its replacement's, if any).
func moduleDir(m *packages.Module) string {
	if m.Replace != nil && m.Replace.Dir != "" {
		return m.Replace.Dir
	}
	return m.Dir
}

func sortedUnique(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	sort.Strings(out)
	return slices.Compact(out)
}
