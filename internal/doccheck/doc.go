// Package doccheck holds the tests that keep the repository's Markdown
// true to the code: every relative link and #anchor resolves, and every Go
// snippet compiles against the packages it shows.
//
// It has no code of its own; its tests read the repository from the module
// root.
//
// # Snippets
//
// Every ```go block in a .md file is type-checked against the module's
// packages (the gocronlock module's, for a block that names gocron or
// gocronlock). An HTML comment on the lines just above a block, invisible
// on GitHub, says how to read it:
//
//   - No comment: the block is the body of a function returning error
//     (its result unnamed, so both "return" and "return err" compile).
//     These names are declared for every block, and a block may declare
//     its own with := instead: ctx (context.Context), rdb (*redis.Client),
//     locker (*padlock.Locker), r (*gin.Engine), mux (*http.ServeMux),
//     logger (*slog.Logger), t (*testing.T).
//   - <!-- go ... -->: the lines after "go" are Go declarations the block
//     needs besides those (var store interface{ ... }, a type, a func),
//     placed at package level; the block is still a function body.
//   - <!-- go: file ... -->: the block is itself package-level
//     declarations, with the declarations after "go: file" beside it.
//   - <!-- the body of ExampleX in path/x_test.go -->: the block is the
//     body of that Example, one tab of indentation removed, character for
//     character; the compiler checks the Example itself.
//
// Imports are added for every package the block and its declarations name
// (padlock, redis, gin, middleware, keyfunc, lockkey, httplock, decorator,
// schedule, idempotency, ginidem, lockview, padlockotel, padlockslog,
// padlocktest, the standard library's usual ones); "declared and not used"
// and "imported and not used" are not reported, since a snippet may stop
// short of using what it shows. Any other error fails the test, at the
// Markdown file and line of the snippet.
package doccheck
