package machinery_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// readmeCode is the code that the README's Go blocks are taken from, each
// compiled and run by a test: example/hello by its Example, example/worker
// and example/producer by TestProducerAndWorkerProcesses (as two
// processes on a real Redis), and workflows' body by
// ExampleServer_SendChord.
func readmeCode(t *testing.T) map[string]string {
	t.Helper()
	code := map[string]string{}
	for _, path := range []string{"../example/hello/main.go", "../example/worker/main.go", "../example/producer/main.go"} {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		code[path] = string(src)
	}
	src, err := os.ReadFile("example_workflows_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(src), "// README Workflows: begin\n")
	body, _, _ = strings.Cut(body, "\t// README Workflows: end")
	code["workflows in example_workflows_test.go"] = dedent(body)
	return code
}

// Every Go block of README.md is a piece of code that a test runs, copied
// line for line, so that none can rot.
func TestREADMEGoBlocksAreTestedCode(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := fencedBlocks(string(readme), "go")
	if len(blocks) < 4 {
		t.Fatalf("README.md has %d Go blocks, want the quick start, the worker, the producer and the workflows", len(blocks))
	}
	code := readmeCode(t)
	for _, block := range blocks {
		found := false
		for _, src := range code {
			found = found || strings.Contains(src, block)
		}
		if !found {
			var names []string
			for name := range code {
				names = append(names, name)
			}
			t.Errorf("README.md's Go block\n%s\nis in none of %s: copy it from there, or add its source to readmeCode", block, strings.Join(names, ", "))
		}
	}
}

// Every relative link of README.md and docs/*.md names a file or directory
// that exists, and an anchor names a heading of its page; every page of
// docs/ is linked from the README.
func TestREADMEAndDocsLinksResolve(t *testing.T) {
	t.Parallel()
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages := append([]string{"../README.md"}, docs...)
	fromReadme := map[string]bool{}
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, link := range markdownLinks(string(text)) {
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(link, "#")
			target := page
			if path != "" {
				target = filepath.Join(filepath.Dir(page), path)
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s links to %s, which does not exist", repoPath(page), link)
					continue
				}
			}
			if page == "../README.md" {
				fromReadme[filepath.Clean(target)] = true
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(target, ".md") {
				t.Errorf("%s links to %s: an anchor into a file that is not Markdown", repoPath(page), link)
				continue
			}
			targetText, err := os.ReadFile(target)
			if err != nil {
				t.Fatal(err)
			}
			if !headingAnchors(string(targetText))[anchor] {
				t.Errorf("%s links to %s: %s has no heading with anchor #%s", repoPath(page), link, repoPath(target), anchor)
			}
		}
	}
	for _, doc := range docs {
		if !fromReadme[filepath.Clean(doc)] {
			t.Errorf("README.md does not link to %s", repoPath(doc))
		}
	}
}

// The helpers agree with GitHub on the examples that matter here.
func TestREADMELinkHelpers(t *testing.T) {
	t.Parallel()
	text := "# A `machinist` command: yes\n```go\n# not a heading [x](nowhere.md)\n```\n## Per-key limits\n## Per-key limits\n" +
		"See [the `x`\ncommand](a.md#b), ![img](c.png) and `[code](d.md)`.\n"
	anchors := headingAnchors(text)
	for _, want := range []string{"a-machinist-command-yes", "per-key-limits", "per-key-limits-1"} {
		if !anchors[want] {
			t.Errorf("no anchor %q in %v", want, anchors)
		}
	}
	if anchors["not-a-heading-xnowheremd"] {
		t.Error("a line in a code block was taken for a heading")
	}
	if got, want := fmt.Sprint(markdownLinks(text)), "[a.md#b c.png]"; got != want {
		t.Errorf("links %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(fencedBlocks(text, "go")), "[# not a heading [x](nowhere.md)]"; got != want {
		t.Errorf("go blocks %s, want %s", got, want)
	}
}

// repoPath returns path, relative to this package, as a path in the
// repository.
func repoPath(path string) string {
	return filepath.ToSlash(strings.TrimPrefix(filepath.Clean(path), ".."+string(filepath.Separator)))
}

// fencedBlocks returns the content of the ``` blocks of text tagged lang.
func fencedBlocks(text, lang string) []string {
	var blocks []string
	var block []string
	in, keep := false, false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			if in && keep {
				blocks = append(blocks, strings.Join(block, "\n"))
			}
			in, keep, block = !in, strings.TrimPrefix(line, "```") == lang, nil
			continue
		}
		if in {
			block = append(block, line)
		}
	}
	return blocks
}

// prose returns text without its fenced blocks and code spans, where links
// and headings are not.
func prose(text string) string {
	var out []string
	in := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			in = !in
			continue
		}
		if !in {
			out = append(out, codeSpan.ReplaceAllString(line, "``"))
		}
	}
	return strings.Join(out, "\n")
}

var (
	codeSpan = regexp.MustCompile("`[^`]*`")
	linkRe   = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
)

// markdownLinks returns the targets of the links and images of text.
func markdownLinks(text string) []string {
	var links []string
	for _, m := range linkRe.FindAllStringSubmatch(prose(text), -1) {
		links = append(links, m[1])
	}
	return links
}

// headingAnchors returns the anchors GitHub gives the headings of text:
// lower case, spaces as hyphens, other punctuation dropped, and -1, -2 …
// after a repeated one.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	in := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			in = !in
			continue
		}
		heading := strings.TrimLeft(line, "#")
		if in || heading == line || !strings.HasPrefix(heading, " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		anchor := b.String()
		if n := seen[anchor]; n > 0 {
			seen[anchor]++
			anchor = fmt.Sprintf("%s-%d", anchor, n)
		} else {
			seen[anchor] = 1
		}
		anchors[anchor] = true
	}
	return anchors
}
