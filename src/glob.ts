/**
 * Redis's glob patterns (SCAN MATCH, KEYS) as a RegExp, for the in-memory store: `*` any run of
 * characters, `?` one character, `[abc]`, `[^a]` and `[a-z]` classes, and `\x` a literal x.
 */
export function globToRegExp(pattern: string): RegExp {
  let source = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '*') source += '[\\s\\S]*';
    else if (c === '?') source += '[\\s\\S]';
    else if (c === '\\' && i + 1 < pattern.length) source += escapeRegExp(pattern[++i]!);
    else if (c === '[') {
      const end = pattern.indexOf(']', i + 2);
      if (end === -1) {
        source += '\\[';
        continue;
      }
      let body = pattern.slice(i + 1, end);
      const negate = body.startsWith('^');
      if (negate) body = body.slice(1);
      source += `[${negate ? '^' : ''}${body.replace(/[\\\]]/g, (x) => `\\${x}`)}]`;
      i = end;
    } else source += escapeRegExp(c);
  }
  return new RegExp(`^${source}$`);
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}
