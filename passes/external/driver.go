package external

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"go/format"
	"go/version"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// keyFormat changes whenever the generated driver or the key's inputs
// change meaning, so old cached drivers are rebuilt.
const keyFormat = "tcc rule driver v2"

// driverModule is the module path of the generated driver.
const driverModule = "tcc-rule-driver"

// BuildDriver builds, into the file out, a tcc binary that registers the
// rules of pkgs (from Inspect) with passes.RegisterExternal, one family per
// package, and then runs the tcc command line (EntryPackage's Main).
//
// The driver is a generated main package in a temporary module, built with
// `go build` in a temporary workspace (go.work) that uses the driver, the
// tcc module of pkgs (PkgInfo.TCCDir, which must be the same for all) and
// every rule package's own module. So a rule package may live inside the
// tcc module tree or in its own module; see the package doc for limits.
//
// The build is skipped when out exists and out+".key" holds the key of the
// current inputs: a hash of the generated sources, the go command's version
// and target settings, and the source files (embedded files included) of
// every non-standard package the driver links, with the go.mod and go.sum
// of their modules; packages of versioned modules in the module cache count
// by module path and version. Progress ("building rule driver for ./pkg
// ...") goes to stderr, only when building. On a failed build the error
// holds the go command's output; out is replaced only by a successful build.
func BuildDriver(ctx context.Context, pkgs []PkgInfo, out string) error {
	_, err := buildDriver(ctx, pkgs, out, os.Stderr)
	return err
}

// buildDriver is BuildDriver with the progress writer; it reports whether
// it built (false: out was fresh).
func buildDriver(ctx context.Context, pkgs []PkgInfo, out string, log io.Writer) (bool, error) {
	p, err := prepare(ctx, pkgs)
	if err != nil {
		return false, err
	}
	defer p.cleanup()
	if old, err := os.ReadFile(out + ".key"); err == nil && string(old) == p.key {
		if st, err := os.Stat(out); err == nil && st.Mode().IsRegular() {
			return false, nil
		}
	}

	start := time.Now()
	fmt.Fprintf(log, "tcc: building rule driver for %s ...\n", describe(pkgs))
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return false, fmt.Errorf("rules: %w", err)
	}
	// Build next to out so the final rename stays on one file system.
	tmpDir, err := os.MkdirTemp(filepath.Dir(out), ".build-")
	if err != nil {
		return false, fmt.Errorf("rules: %w", err)
	}
	defer os.RemoveAll(tmpDir)
	tmpOut := filepath.Join(tmpDir, filepath.Base(out))
	if _, err := p.goCmd(ctx, "build", "-o", tmpOut, "."); err != nil {
		return false, fmt.Errorf("rules: building the rule driver for %s: %w\ngenerated go.work:\n%s", describe(pkgs), err, p.src["go.work"])
	}
	if err := os.Rename(tmpOut, out); err != nil {
		return false, fmt.Errorf("rules: %w", err)
	}
	if err := writeFileAtomic(out+".key", []byte(p.key)); err != nil {
		return false, fmt.Errorf("rules: %w", err)
	}
	fmt.Fprintf(log, "tcc: rule driver ready (%.1fs): %s\n", time.Since(start).Seconds(), out)
	return true, nil
}

// plan is a generated driver written to a temporary directory, with the
// key of everything its binary depends on.
type plan struct {
	goBin string
	env   map[string]string // go env settings (goEnv)
	src   map[string][]byte // driverSources
	dir   string            // holds src
	key   string
}

// prepare generates the driver for pkgs into a temporary directory and
// computes its key; the caller must call cleanup.
func prepare(ctx context.Context, pkgs []PkgInfo) (*plan, error) {
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("rules: no rule packages to build a driver for")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("rules: building a rule driver needs the go command on PATH: %w", err)
	}
	p := &plan{goBin: goBin}
	if p.src, err = driverSources(pkgs); err != nil {
		return nil, err
	}
	if p.env, err = goEnv(ctx, goBin); err != nil {
		return nil, err
	}
	if p.dir, err = os.MkdirTemp("", "tcc-rule-driver-"); err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	for _, name := range sortedKeys(p.src) {
		if err := os.WriteFile(filepath.Join(p.dir, name), p.src[name], 0o644); err != nil {
			p.cleanup()
			return nil, fmt.Errorf("rules: writing driver source: %w", err)
		}
	}
	if p.key, err = p.driverKey(ctx); err != nil {
		p.cleanup()
		return nil, fmt.Errorf("rules: resolving the rule driver's packages for %s: %w\ngenerated go.work:\n%s", describe(pkgs), err, p.src["go.work"])
	}
	return p, nil
}

func (p *plan) cleanup() { os.RemoveAll(p.dir) }

// goCmd runs the go command in the driver's directory and workspace and
// returns its standard output; on failure the error holds its stderr.
func (p *plan) goCmd(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, p.goBin, args...)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(p.dir, "go.work"))
	if f := workspaceFlags(p.env["GOFLAGS"]); f != p.env["GOFLAGS"] {
		cmd.Env = append(cmd.Env, "GOFLAGS="+f)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go %s: %v:\n%s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// workspaceFlags drops from GOFLAGS the -mod and -modfile settings, which
// workspace mode rejects.
func workspaceFlags(goflags string) string {
	var keep []string
	for _, f := range strings.Fields(goflags) {
		if !strings.HasPrefix(f, "-mod=") && !strings.HasPrefix(f, "--mod=") && !strings.HasPrefix(f, "-modfile=") && !strings.HasPrefix(f, "--modfile=") {
			keep = append(keep, f)
		}
	}
	return strings.Join(keep, " ")
}

// describe names the packages for progress messages: directories relative
// to the working directory ("./myrules") where possible, else import paths.
func describe(pkgs []PkgInfo) string {
	wd, _ := os.Getwd()
	var names []string
	for _, p := range pkgs {
		name := p.Path
		if rel, err := filepath.Rel(wd, p.Dir); wd != "" && p.Dir != "" && err == nil && !strings.HasPrefix(rel, "..") {
			name = "./" + filepath.ToSlash(rel)
		}
		names = append(names, name)
	}
	return strings.Join(names, ", ")
}

var mainTemplate = template.Must(template.New("main").Parse(`// Code generated by tcc (passes/external) for --rules. DO NOT EDIT.

// Command tcc is the tcc command line with these out-of-tree rule families:
{{- range .}}
//   - {{.Family}}: {{.Path}}
{{- end}}
package main

import (
	"fmt"
	"os"

	"` + EntryPackage + `"
	"` + passesPath + `"
	"` + passesPath + `/external"
{{range $i, $p := .}}
	rules{{$i}} {{printf "%q" $p.Path}}
{{- end}}
)

func main() {
	os.Exit(external.Supervise(func() int {
{{- range $i, $p := .}}
		if err := passes.RegisterExternal({{printf "%q" $p.Family}}, rules{{$i}}.Rules()...); err != nil {
			fmt.Fprintf(os.Stderr, "tcc: rules from %s: %v\n", {{printf "%q" $p.Path}}, err)
			return 1
		}
{{- end}}
		return cli.Main()
	}))
}
`))

// driverSources returns the generated driver module: main.go, go.mod and
// go.work (which uses "." for the driver, so the text does not depend on
// where it is written).
func driverSources(pkgs []PkgInfo) (map[string][]byte, error) {
	tccDir := pkgs[0].TCCDir
	if tccDir == "" {
		return nil, fmt.Errorf("rules: package %s has no TCCDir; use Inspect to get PkgInfo", pkgs[0].Path)
	}
	family := map[string]string{}
	for _, p := range pkgs {
		if p.TCCDir != tccDir {
			return nil, fmt.Errorf("rules: packages %s and %s build against different tcc modules (%s and %s); the driver needs one", pkgs[0].Path, p.Path, tccDir, p.TCCDir)
		}
		if p.ModuleDir == "" {
			return nil, fmt.Errorf("rules: package %s is not in a module; the rule driver needs module mode", p.Path)
		}
		if other, dup := family[p.Family]; dup {
			return nil, fmt.Errorf("rules: packages %s and %s both define rule family %q", other, p.Path, p.Family)
		}
		family[p.Family] = p.Path
	}
	var main bytes.Buffer
	if err := mainTemplate.Execute(&main, pkgs); err != nil {
		return nil, fmt.Errorf("rules: generating driver: %w", err)
	}
	mainSrc, err := format.Source(main.Bytes())
	if err != nil {
		return nil, fmt.Errorf("rules: generated driver does not parse: %w\n%s", err, main.Bytes())
	}

	goVer, err := goDirective(filepath.Join(tccDir, "go.mod"))
	if err != nil {
		return nil, err
	}
	uses := map[string]bool{tccDir: true}
	for _, p := range pkgs {
		uses[p.ModuleDir] = true
		if p.GoVersion != "" && version.Compare("go"+p.GoVersion, "go"+goVer) > 0 {
			goVer = p.GoVersion
		}
	}
	var work strings.Builder
	fmt.Fprintf(&work, "go %s\n\nuse (\n\t.\n", goVer)
	for _, d := range sortedKeys(uses) {
		fmt.Fprintf(&work, "\t%s\n", strconv.Quote(d))
	}
	work.WriteString(")\n")
	mod := fmt.Sprintf("module %s\n\ngo %s\n", driverModule, goVer)
	return map[string][]byte{"main.go": mainSrc, "go.mod": []byte(mod), "go.work": []byte(work.String())}, nil
}

// goDirective returns the version of the go directive in the go.mod file.
func goDirective(gomod string) (string, error) {
	data, err := os.ReadFile(gomod)
	if err != nil {
		return "", fmt.Errorf("rules: reading tcc's go.mod: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "go" {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("rules: %s has no go directive", gomod)
}

// goEnv returns the go command's settings that affect the driver binary.
func goEnv(ctx context.Context, goBin string) (map[string]string, error) {
	out, err := exec.CommandContext(ctx, goBin, "env", "-json", "GOVERSION", "GOOS", "GOARCH", "CGO_ENABLED", "GOFLAGS", "GOEXPERIMENT", "GOAMD64", "GOARM64", "GOTOOLCHAIN").Output()
	if err != nil {
		return nil, fmt.Errorf("rules: go env: %w", err)
	}
	env := map[string]string{}
	if err := json.Unmarshal(out, &env); err != nil {
		return nil, fmt.Errorf("rules: go env -json: %w", err)
	}
	return env, nil
}

// listedPkg is the part of `go list -json` output the key reads.
type listedPkg struct {
	ImportPath string
	Dir        string
	Standard   bool
	GoFiles, CgoFiles, CFiles, CXXFiles, MFiles, HFiles, FFiles, SFiles,
	SwigFiles, SwigCXXFiles, SysoFiles, EmbedFiles []string
	Module *listedModule
}

type listedModule struct {
	Path, Version, GoMod string
	Replace              *listedModule
}

// listFields are the fields of listedPkg, for go list -json=.
const listFields = "ImportPath,Dir,Standard,GoFiles,CgoFiles,CFiles,CXXFiles,MFiles,HFiles,FFiles,SFiles,SwigFiles,SwigCXXFiles,SysoFiles,EmbedFiles,Module"

// driverKey hashes everything the driver binary depends on: the generated
// sources, the go command's settings, and, from go list -deps of the
// driver, the files of every non-standard package with its module's go.mod
// and go.sum, or just path@version for a versioned (immutable) module.
func (p *plan) driverKey(ctx context.Context) (string, error) {
	out, err := p.goCmd(ctx, "list", "-deps", "-json="+listFields, ".")
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", keyFormat)
	for _, k := range sortedKeys(p.env) {
		fmt.Fprintf(h, "env %s=%q\n", k, p.env[k])
	}
	for _, name := range sortedKeys(p.src) {
		fmt.Fprintf(h, "src %s %d\n", name, len(p.src[name]))
		h.Write(p.src[name])
	}
	var files, mods []string
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var lp listedPkg
		if err := dec.Decode(&lp); err == io.EOF {
			break
		} else if err != nil {
			return "", fmt.Errorf("go list output: %w", err)
		}
		if lp.Standard || lp.Module != nil && lp.Module.Path == driverModule {
			continue // the standard library is covered by GOVERSION, the driver by src
		}
		if m := lp.Module; m != nil {
			if m.Replace == nil && m.Version != "" {
				mods = append(mods, m.Path+"@"+m.Version)
				continue
			}
			if m.Replace != nil {
				m = m.Replace
			}
			if m.GoMod != "" {
				files = append(files, m.GoMod, filepath.Join(filepath.Dir(m.GoMod), "go.sum"))
			}
		}
		for _, list := range [][]string{lp.GoFiles, lp.CgoFiles, lp.CFiles, lp.CXXFiles, lp.MFiles, lp.HFiles, lp.FFiles, lp.SFiles, lp.SwigFiles, lp.SwigCXXFiles, lp.SysoFiles, lp.EmbedFiles} {
			for _, f := range list {
				files = append(files, filepath.Join(lp.Dir, f))
			}
		}
	}
	for _, f := range sortedUnique(files) {
		sum := "missing"
		if data, err := os.ReadFile(f); err == nil {
			s := sha256.Sum256(data)
			sum = hex.EncodeToString(s[:])
		}
		fmt.Fprintf(h, "file %q %s\n", f, sum)
	}
	for _, m := range sortedUnique(mods) {
		fmt.Fprintf(h, "module %s\n", m)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), path)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
