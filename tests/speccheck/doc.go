// Package speccheck holds a test that keeps the repository's citations of its own
// specification, docs/spec.md, honest.
//
// The test walks the whole repository (every text file, tracked or not, except .git and
// testdata folders) and fails, naming file and line, when:
//
//   - a citation written "spec §N" or "spec §N.M" (and every further section in a list
//     that follows it, such as "spec §4.6–§4.8" or "spec §9.1, §9.3") names a section that
//     has no heading in docs/spec.md;
//   - a Markdown link to spec.md does not resolve to docs/spec.md, or its #fragment is not
//     the anchor of one of its headings;
//   - docs/spec.md has two headings with the same section number, or refers to a section
//     (§N, §N.M) it does not have;
//   - a file still refers to the external product document the specification replaced
//     (the word written in capitals, or the relative path of the folder beside the
//     repository that held it).
//
// Headings in docs/spec.md are written "## §N Title" and "### §N.M Title". The package has
// no other code; the test runs with go test ./... (make test).
package speccheck
