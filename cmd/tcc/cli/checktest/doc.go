// Package checktest holds a test of `tcc run --check` that registers a
// deliberately wrong fusion rule; it lives apart from package cli's tests
// because rule registration is process-wide.
package checktest
