// Command mutant runs the mutant catalog: small patches of the engine
// (the root package, its Lua scripts in lua/, and package schedule), each
// breaking one promise the documentation makes, and reports which of them
// the fault-schedule explorer (TestExplore) kills, and which the rest of
// the suite does.
//
//	go run ./internal/mutant [flags] [names...]
//
// With no names it runs every mutant; a name is a catalog file's name
// without its ".txt" (05-fence-clock-repeats), or its number (05). For
// each mutant it copies the module's files (git ls-files, or a walk that
// skips .git) to a temporary directory, applies the mutant's edits there,
// builds the copy (go build ./... and go test -c of the root package),
// and runs the explorer at CI's budget:
//
//	PADLOCK_EXPLORE_SEEDS=400 PADLOCK_EXPLORE_STOP=1 go test -v -count=1 -run '^TestExplore$' .
//
// A mutant is killed when that run fails; the report names the first
// invariant the explorer says broke, the seeds it ran and the time it
// took. The working tree is never changed: edits happen in the copies
// only.
//
// Flags:
//
//	-check          only apply and build every mutant (no explorer, no suite)
//	-suite          also run, for the mutants the explorer let survive, the
//	                tests of the packages the mutant touches, without the
//	                explorer (go test -count=1 -failfast -skip '^TestExplore$'), on real
//	                redis-server (PADLOCK_REQUIRE_REDIS=1); -suite=all runs
//	                them for every mutant
//	-j N            mutants run at once (default 1)
//	-markdown       print the kill table as Markdown, for RELIABILITY.md
//	-keep           keep each mutant's copy and logs
//	-logs DIR       write each mutant's build, explorer and suite output there
//
// The run exits non-zero when any mutant is stale (an edit's find text is
// missing, or found more than once, in the current tree) or does not
// build. TestCatalogApplies (skipped under -short) applies every mutant's
// edits, without compiling, so a refactor that leaves a mutant stale fails
// the suite at once; the catalog is then brought up to date by hand.
//
// # The catalog
//
// Each mutant is a file catalog/NN-short-name.txt: a header, then one or
// more edit blocks.
//
// The header is lines of the form "field: value"; a line that starts with
// a space or a tab continues the previous field, and a line that starts
// with '#' is a comment. The fields:
//
//	promise:    the documented sentence the mutant breaks, quoted, and
//	            where it is written
//	primitive:  the primitive or mechanism the mutant touches
//	expect:     the kind of check that should catch it
//
// An edit block names a file (a slash-separated path from the module's
// root), the exact text to find and the text to put in its place:
//
//	@@@ lua/release.lua
//	<<<
//	if not seq then
//	===
//	if not v then
//	>>>
//
// The lines between "<<<" and "===" are the find text, those between
// "===" and ">>>" the replacement, both taken exactly (tabs included),
// joined by newlines, without a newline after the last line. The find
// text must occur exactly once in the file; keep it to one to three
// lines, so that refactors of code nearby rarely break it. A file may
// hold several blocks, for one file or several; they are applied in
// order, each to the result of the ones before it.
package main
