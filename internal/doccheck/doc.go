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
package doccheck
