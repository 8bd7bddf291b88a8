// Package external links out-of-tree fusion rules into tcc. A kernel author
// keeps rules in an ordinary Go package and names it on the command line:
//
//	tcc build tiny-mlp --rules ./myrules
//	tcc report ops tiny-mlp --stage fused --rules ./myrules
//	tcc passes --rules ./myrules          # lists the new family and rules
//
// A rule package is a non-main package that declares exactly
//
//	func Rules() []*rewrite.Rule // rewrite = github.com/tcc-dev/tcc/passes/rewrite
//
// and optionally a string constant Family naming its rule family (default:
// the package name). See the worked example, package
// passes/external/example, for how to write one.
//
// # How it works
//
// Go cannot load code into a running program without plugins, so tcc does
// what xcaddy does: it builds a second tcc binary, the rule driver, whose
// main registers the package's rules and then runs the same command line.
//
//  1. Inspect loads the packages with golang.org/x/tools/go/packages and
//     checks them: load and type errors (file:line:col), the exact Rules
//     signature, the family name. Errors name the package and what was
//     found.
//  2. BuildDriver generates the driver's main package (it imports
//     EntryPackage, passes and the rule packages and calls
//     passes.RegisterExternal per package before cli.Main) into a temporary
//     module, writes a go.work that uses it, the tcc module the rule
//     packages were type-checked against (PkgInfo.TCCDir) and every rule
//     package's own module, and runs `go build`. The binary is cached: it is
//     rebuilt only when the key (generated sources, go version and target,
//     the contents of every non-standard package file the driver links) no
//     longer matches the one stored next to it.
//  3. Reexec, called by the tcc command line when --rules is given, does
//     1 and 2 (cache in $TCC_CACHE_DIR/rule-drivers, else the user cache
//     directory's tcc/rule-drivers) and runs the driver with the same
//     arguments minus --rules, the same stdin, stdout and stderr, and
//     returns its exit status as an *ExitError. The driver runs with
//     TCC_RULES_DRIVER set and refuses to start another driver.
//  4. The driver is supervised (Supervise on its side, runDriver on
//     tcc's): it is killed after --rules-timeout (default DefaultTimeout),
//     signals to tcc are passed on to it, a pipe only tcc writes to tells
//     it when tcc is gone (however tcc died), and it reports its status
//     through a second pipe once the command has finished, so a rule
//     package that calls os.Exit is an error even with status 0.
//
// A rule package is code that runs with the user's privileges: tcc builds
// and runs whatever the package contains. Load only what you trust.
//
// The first build compiles tcc (tens of seconds with a cold build cache);
// later builds after an edit mostly relink (a second or two); reusing a
// cached driver costs the inspection and a go list, a fraction of a second.
//
// # Where rule packages may live, and limits
//
//   - Inside the tcc module tree (like passes/external/example): nothing
//     else is needed.
//   - In their own module: that module must build on its own against a tcc
//     checkout, i.e. require github.com/tcc-dev/tcc with a replace directive
//     (or a go.work) pointing at the checkout, a go directive no older than
//     tcc's, and be tidy (go mod tidy). A --rules directory pattern is
//     loaded from inside that directory, so `--rules ../myrules` works from
//     anywhere; an import-path pattern is resolved in the working
//     directory's module.
//   - tcc must be available as source: the driver is built from the tcc
//     module the rule packages resolve to, and that tcc must have
//     EntryPackage. All rule packages of one command must resolve to the
//     same tcc directory.
//   - The driver workspace selects one version of each shared dependency
//     across tcc and the rule modules (minimal version selection), so a
//     rule module that requires a newer version of one of tcc's
//     dependencies upgrades it in the driver.
//   - The go command (with tcc's Go version) must be on PATH at run time.
//     GOPATH mode, vendor directories and GOFLAGS -mod/-modfile settings
//     (dropped for the driver's workspace build) are not supported.
//   - Rule names must be unique across all families, built-in and external;
//     the driver reports a clash when it starts. Families are tried in name
//     order, so an external family sorting before a built-in one has its
//     rules tried first at each op.
//   - Each set of rule packages has one cache slot, overwritten when the
//     key changes; stale slots are never removed automatically (delete the
//     cache directory to reclaim the space).
package external
