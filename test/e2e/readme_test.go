package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// readmeBlocks returns the fenced blocks of the README section whose
// heading is heading, in order, with their info strings.
func readmeBlocks(t *testing.T, heading string) (langs, blocks []string) {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no section %q", heading)
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	lines := strings.Split(section, "\n")
	for i := 0; i < len(lines); i++ {
		lang, ok := strings.CutPrefix(lines[i], "```")
		if !ok {
			continue
		}
		var b strings.Builder
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			b.WriteString(lines[i] + "\n")
		}
		langs, blocks = append(langs, lang), append(blocks, b.String())
	}
	return langs, blocks
}

// TestReadmeWalkthrough runs the README's one-minute walkthrough exactly as
// it is written, with the built binary as `doubletake` on PATH, in an empty
// directory, and compares what it prints with the output the README shows.
// The walkthrough uses the embedded default's fixed ports, so it runs in a
// network namespace of its own (unshare -rn): other gateways on this machine
// cannot take them, and it cannot take theirs.
func TestReadmeWalkthrough(t *testing.T) {
	langs, blocks := readmeBlocks(t, "## See it work in a minute")
	if len(blocks) != 2 || langs[0] != "sh" || langs[1] != "text" {
		t.Fatalf("the walkthrough section holds %d blocks (%q); want the sh block and the text block of its output", len(blocks), langs)
	}
	script, want := blocks[0], blocks[1]
	for _, dep := range []string{"curl", "jq", "unshare", "ip"} {
		_, err := exec.LookPath(dep)
		requireDep(t, err, dep)
	}
	probe := exec.Command("unshare", "-rn", "ip", "link", "set", "lo", "up")
	if out, err := probe.CombinedOutput(); err != nil {
		requireDep(t, fmt.Errorf("%w: %s", err, bytes.TrimSpace(out)), "a network namespace (unshare -rn)")
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "walkthrough.sh"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "-rn", "sh", "-c", "ip link set lo up && exec bash -e walkthrough.sh")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(binary)+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	gatewayLog, _ := os.ReadFile(filepath.Join(dir, "gateway.log"))
	if err != nil {
		t.Fatalf("the walkthrough failed: %v\nstdout:\n%s\nstderr:\n%s\ngateway.log:\n%s", err, &stdout, &stderr, gatewayLog)
	}
	if got := stdout.String(); got != want {
		t.Fatalf("the walkthrough printed\n%s\nthe README says it prints\n%s\ngateway.log:\n%s", got, want, gatewayLog)
	}
}

// mdLink is a Markdown link or image target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsLinks follows every relative link in README.md and docs/*.md: the
// file must exist and, for a link to a Markdown heading, the heading too.
func TestDocsLinks(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := append([]string{filepath.Join(repoRoot, "README.md")}, docs...)
	for _, file := range files {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, file)
		for _, m := range mdLink.FindAllStringSubmatch(string(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			dest := file
			if path != "" {
				dest = filepath.Join(filepath.Dir(file), path)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link %s: %v", rel, target, err)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			body, err := os.ReadFile(dest)
			if err != nil {
				t.Errorf("%s: link %s: %v", rel, target, err)
				continue
			}
			if !hasAnchor(string(body), anchor) {
				t.Errorf("%s: link %s: no heading with that anchor", rel, target)
			}
		}
	}
}

// hasAnchor reports whether markdown has a heading whose GitHub anchor is
// anchor: lowercased, spaces as hyphens, punctuation but '-' and '_' gone.
func hasAnchor(markdown, anchor string) bool {
	inFence := false
	for _, line := range strings.Split(markdown, "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		if b.String() == anchor {
			return true
		}
	}
	return false
}
