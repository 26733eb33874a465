// Package doccheck holds the tests that keep the repository's
// documentation true to the code: every relative link and #anchor of the
// Markdown resolves, every Go snippet compiles against the packages it
// shows, and every exported name has the doc comment and Example the
// rules below ask for.
//
// It has no code of its own; its tests read the repository from the module
// root.
//
// # Snippets
//
// Every ```go block in a .md file is type-checked against the module's
// packages (the gocronlock module's, for a block that imports gocron or
// gocronlock), with the imports the block shows and no others, so that a
// reader can paste it:
//
//   - A block begins with its import block (after comments, if any), and
//     then is either package-level declarations (a func taking what it
//     uses: the Locker, the context, the router) or, failing that, the
//     body of a function returning error (its result unnamed, so both
//     "return" and "return err" compile). A name the block uses must be
//     imported or declared in it: nothing is declared for it.
//   - A block without an import block compiles with its guide's: the
//     import block of the first block of the same Markdown file. A block
//     without one, in a file whose first block shows none, fails.
//   - A block's own import block imports what the block uses and nothing
//     else ("imported and not used" fails); a block of declarations is
//     as gofmt prints it. "declared and not used" is let pass, since a
//     block may stop short of using what it shows.
//   - <!-- go ... -->, an HTML comment on the lines just above a block
//     (invisible on GitHub): the lines after "go" are declarations of the
//     reader's own code the block calls, or of a type an earlier block of
//     the guide showed, compiled in a file of their own with the packages
//     they name imported for them.
//   - <!-- the body of ExampleX in path/x_test.go -->: after its import
//     block, the block is the body of that Example, one tab of
//     indentation removed, character for character; the compiler checks
//     the Example itself, and this package the block's imports.
//
// Any other error fails the test, at the Markdown file and line of the
// snippet.
//
// # API documentation
//
// TestAPIDocs reads, with go/doc, every package a user imports: the root
// module's and the gocronlock module's, but internal ones, commands and
// the chaos suite. In each:
//
//   - Every exported const, var, func, type and method of an exported
//     type has a doc comment (a const or var one on its group will do),
//     and a func's or type's begins with its name, after A, An or The
//     if it likes. Every exported field of an exported struct, and every
//     method of an exported interface, has a comment, above it or at the
//     end of its line.
//   - A setting states its default: the comment of every exported field
//     of a struct named Options or ending in Options or Config says
//     "default" (or "Required"), and so does the doc comment of every
//     func returning an option (a type whose name ends in Option).
//   - A func or method whose last result is an error says which: its doc
//     comment names a sentinel (ErrNotHeld) or an error type
//     (*QuorumError), or says "error" or when it fails.
//
// TestAPIExamples keeps the list of padlock's main call sequences
// (examples in api_test.go), each with the Example that shows it: it
// must exist and run, with an // Output: comment, unless the list says
// why it cannot (it needs three independent Redis masters); and an
// Example without output anywhere in those packages must be on the list
// with its reason, since an Example that is only compiled can show a
// sequence that no longer works. A new main call sequence gets its
// Example and its line there.
//
// TestAPICheckerCatchesBreaks feeds both checks a package that breaks
// each rule, so they cannot pass by checking nothing.
package doccheck
