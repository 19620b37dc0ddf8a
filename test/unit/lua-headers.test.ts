/** Each script's contract header matches the code that calls it. */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import * as scripts from '../../src/lua/scripts.generated.js';

const dir = new URL('../../src/lua/', import.meta.url);
const backendSource = readFileSync(new URL('../../src/backend/redis-backend.ts', import.meta.url), 'utf8');

describe('lua scripts', () => {
  const all = Object.values(scripts);
  it('every .lua file is compiled into the module', () => {
    const files = readdirSync(dir).filter((f) => f.endsWith('.lua'));
    expect(all.map((s) => s.name).sort()).toEqual(files.map((f) => f.replace('.lua', '').replace(/-(\w)/g, (_, c: string) => c.toUpperCase())).sort());
  });

  for (const script of Object.values(scripts)) {
    it(`${script.name}: the caller passes as many keys and arguments as the header declares`, () => {
      // runScript(client, <name>Script, [k1, k2], [a1, a2, ...]) in the backend
      const call = new RegExp(`runScript\\([^,]+, ${script.name}Script, \\[([^\\]]*)\\], \\[([^\\]]*)\\]`, 'm');
      const match = backendSource.replace(/\s+/g, ' ').match(call);
      expect(match, `no call of ${script.name}Script found`).not.toBeNull();
      const count = (list: string): number => (list.trim() === '' ? 0 : list.split(',').filter((s) => s.trim() !== '').length);
      expect(count(match![1]!)).toBe(script.numberOfKeys);
      expect(count(match![2]!)).toBe(script.numberOfArgs);
    });
  }
});
