/**
 * Every relative link in README.md and docs/*.md points at a file that exists, and every
 * `#anchor` into a Markdown file names a heading of that file, slugged as GitHub does.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const pages = ['README.md', ...readdirSync(join(repo, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

/** The lines of a Markdown file outside fenced code blocks (``` or ~~~), with their numbers. */
function proseLines(markdown: string): { text: string; line: number }[] {
  const out: { text: string; line: number }[] = [];
  let fence: string | undefined;
  markdown.split('\n').forEach((text, i) => {
    const marker = /^\s{0,3}(`{3,}|~{3,})/.exec(text)?.[1];
    if (marker !== undefined) {
      if (fence === undefined) fence = marker;
      else if (marker[0] === fence[0] && marker.length >= fence.length) fence = undefined;
      return;
    }
    if (fence === undefined) out.push({ text, line: i + 1 });
  });
  return out;
}

/** GitHub's heading slug: the heading's text, lower-cased, punctuation dropped, spaces as hyphens. */
function githubSlug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // a link or image: its text
    .replace(/`([^`]*)`/g, '$1') // code: its content
    .replace(/<[^>]+>/g, '') // inline HTML tags
    .replace(/[*]/g, ''); // emphasis
  return text
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors a Markdown file defines: its headings' slugs (duplicates numbered) and `<a id|name>`. */
function anchors(markdown: string): Set<string> {
  const found = new Set<string>();
  const seen = new Map<string, number>();
  for (const { text } of proseLines(markdown)) {
    const heading = /^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/.exec(text);
    if (heading) {
      const slug = githubSlug(heading[1]!);
      const n = seen.get(slug) ?? 0;
      seen.set(slug, n + 1);
      found.add(n === 0 ? slug : `${slug}-${n}`);
    }
    for (const m of text.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) found.add(m[1]!);
  }
  return found;
}

interface Link {
  readonly page: string;
  readonly line: number;
  readonly target: string;
}

/** Inline links and images outside code, `[text](target)`, in a page. */
function links(page: string): Link[] {
  const out: Link[] = [];
  for (const { text, line } of proseLines(readFileSync(join(repo, page), 'utf8'))) {
    const prose = text.replace(/`[^`]*`/g, '``');
    for (const m of prose.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) out.push({ page, line, target: m[1]! });
  }
  return out;
}

/** What is wrong with a link, or undefined when it resolves. */
function problem(link: Link): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(link.target)) return undefined; // https:, mailto:: not checked here
  const hash = link.target.indexOf('#');
  const path = hash < 0 ? link.target : link.target.slice(0, hash);
  const anchor = hash < 0 ? undefined : decodeURIComponent(link.target.slice(hash + 1));
  const file = path === '' ? join(repo, link.page) : resolve(repo, dirname(link.page), decodeURIComponent(path));
  if (!existsSync(file)) return `no such file: ${relative(repo, file)}`;
  if (anchor === undefined || !file.endsWith('.md')) return undefined;
  if (!anchors(readFileSync(file, 'utf8')).has(anchor)) return `no heading with anchor #${anchor} in ${relative(repo, file)}`;
  return undefined;
}

describe('links in README.md and docs/*.md', () => {
  it('slugs headings as GitHub does', () => {
    expect(githubSlug('Server-side compare-and-set (`SET IFEQ`, `DELEX`, `DELIFEQ`)')).toBe('server-side-compare-and-set-set-ifeq-delex-delifeq');
    expect(githubSlug('The `latchkey` command')).toBe('the-latchkey-command');
    expect(githubSlug('Semaphores: at most N at a time')).toBe('semaphores-at-most-n-at-a-time');
    expect(githubSlug('Compat mode: sharing a lock with the timestamp lock (migration only)')).toBe(
      'compat-mode-sharing-a-lock-with-the-timestamp-lock-migration-only',
    );
    expect([...anchors('# A\n```sh\n# not a heading\n```\n## A\n### B & c\n')]).toEqual(['a', 'a-1', 'b--c']);
  });

  it('finds the links', () => {
    const all = pages.flatMap(links);
    expect(pages).toContain('docs/safety.md');
    expect(all.filter((l) => l.page === 'README.md' && l.target.includes('#')).length).toBeGreaterThan(10);
    // A broken one is reported, not passed over.
    expect(problem({ page: 'README.md', line: 0, target: 'docs/safety.md#no-such-heading' })).toMatch(/no heading/);
    expect(problem({ page: 'README.md', line: 0, target: 'docs/no-such-page.md' })).toMatch(/no such file/);
  });

  it.each(pages)('%s: every relative link and #anchor resolves', (page) => {
    const broken = links(page)
      .map((link) => ({ link, problem: problem(link) }))
      .filter((r) => r.problem !== undefined)
      .map((r) => `${page}:${r.link.line}: (${r.link.target}) ${r.problem}`);
    expect(broken).toEqual([]);
  });
});
