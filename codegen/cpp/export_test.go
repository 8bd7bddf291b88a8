package cpp

// Update is the -update flag, for the external tests (persist_test.go).
var Update = update
