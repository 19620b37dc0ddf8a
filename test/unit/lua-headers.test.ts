/**
 * Each script's contract header matches the code that calls it: the generated module counts the
 * KEYS and ARGV a header declares, and runScript refuses a call that passes other counts, so every
 * integration test that runs an operation checks its call against the header.
 */
import { readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { FENCE_RETENTION } from '../../src/backend/backend.js';
import { BackendError } from '../../src/errors.js';
import { runScript } from '../../src/lua/run-script.js';
import * as scripts from '../../src/lua/scripts.generated.js';
import type { ScriptClient } from '../../src/client/script-client.js';
import type { LuaScript } from '../../src/lua/lua-script.js';

const dir = new URL('../../src/lua/', import.meta.url);

describe('lua scripts', () => {
  const all = Object.values(scripts);
  it('every .lua file is compiled into the module', () => {
    const files = readdirSync(dir).filter((f) => f.endsWith('.lua'));
    expect(all.map((s) => s.name).sort()).toEqual(files.map((f) => f.replace('.lua', '').replace(/-(\w)/g, (_, c: string) => c.toUpperCase())).sort());
  });

  it('every script declares its keys and arguments in its header', () => {
    for (const script of all) {
      expect(script.source.startsWith('--[['), script.name).toBe(true);
      expect(script.numberOfKeys + (script.keysPerItem ?? 0), script.name).toBeGreaterThan(0);
    }
  });

  it('runScript refuses a call whose keys or arguments do not match the header, before sending anything', async () => {
    let sent = 0;
    const client = { evalsha: async () => sent++, eval: async () => sent++ } as unknown as ScriptClient;
    const script = scripts.extendScript;
    const keys = Array.from({ length: script.numberOfKeys }, (_, i) => `k${i}`);
    const args = Array.from({ length: script.numberOfArgs }, (_, i) => `a${i}`);
    await expect(runScript(client, script, keys, args.slice(1))).rejects.toBeInstanceOf(BackendError);
    await expect(runScript(client, script, [...keys, 'extra'], args)).rejects.toThrow(/header declares/);
    expect(sent).toBe(0);
    await runScript(client, script, keys, args);
    expect(sent).toBe(1);
  });

  it('a script on several locks takes whole items of keys only, at least one', async () => {
    let sent = 0;
    const client = { evalsha: async () => sent++, eval: async () => sent++ } as unknown as ScriptClient;
    const script = scripts.multiAcquireScript;
    expect(script.keysPerItem).toBe(2);
    const args = Array.from({ length: script.numberOfArgs }, (_, i) => `a${i}`);
    await expect(runScript(client, script, [], args)).rejects.toThrow(/2 per item/);
    await expect(runScript(client, script, ['l1', 'f1', 'l2'], args)).rejects.toBeInstanceOf(BackendError);
    expect(sent).toBe(0);
    await runScript(client, script, ['l1', 'f1', 'l2', 'f2'], args);
    expect(sent).toBe(1);
  });

  it('a script with arguments per item takes exactly that many per item of keys', async () => {
    let sent = 0;
    const client = { evalsha: async () => sent++, eval: async () => sent++ } as unknown as ScriptClient;
    // No script of latchkey's takes arguments per item today (extend-many.lua sends its tokens as
    // one argument); the header rule stays: `ARGV[i+1]` lines after one fixed argument.
    const script: LuaScript = { ...scripts.extendManyScript, numberOfArgs: 1, argsPerItem: 1 };
    await expect(runScript(client, script, [], ['100'])).rejects.toThrow(/1 per item and 1 \+ 1 per item/);
    await expect(runScript(client, script, ['l1', 'l2'], ['100', 't1'])).rejects.toBeInstanceOf(BackendError);
    await expect(runScript(client, script, ['l1'], ['100', 't1', 't2'])).rejects.toBeInstanceOf(BackendError);
    expect(sent).toBe(0);
    await runScript(client, script, ['l1', 'l2'], ['100', 't1', 't2']);
    expect(sent).toBe(1);
  });

  it('extend-many.lua takes a key per lease and three arguments, the tokens in one', async () => {
    let sent = 0;
    const client = { evalsha: async () => sent++, eval: async () => sent++ } as unknown as ScriptClient;
    const script = scripts.extendManyScript;
    expect([script.numberOfKeys, script.keysPerItem, script.numberOfArgs, script.argsPerItem]).toEqual([0, 1, 3, undefined]);
    await expect(runScript(client, script, [], ['100', '2', ''])).rejects.toBeInstanceOf(BackendError);
    await expect(runScript(client, script, ['l1', 'l2'], ['100', '2', 't1', 't2'])).rejects.toBeInstanceOf(BackendError);
    expect(sent).toBe(0);
    await runScript(client, script, ['l1', 'l2'], ['100', '2', 't1t2']);
    expect(sent).toBe(1);
  });

  it('a script with optional trailing keys and arguments takes from the required ones up to all declared', async () => {
    let sent = 0;
    const client = { evalsha: async () => sent++, eval: async () => sent++ } as unknown as ScriptClient;
    const script = scripts.acquireScript;
    expect([script.numberOfKeys, script.optionalKeys, script.numberOfArgs, script.optionalArgs]).toEqual([4, 2, 5, 3]);
    const keys = (n: number): string[] => Array.from({ length: n }, (_, i) => `k${i}`);
    const args = (n: number): string[] => Array.from({ length: n }, (_, i) => `a${i}`);
    await expect(runScript(client, script, keys(1), args(2))).rejects.toThrow(/declares 2 to 4 and 2 to 5/);
    await expect(runScript(client, script, keys(5), args(5))).rejects.toBeInstanceOf(BackendError);
    await expect(runScript(client, script, keys(2), args(1))).rejects.toBeInstanceOf(BackendError);
    await expect(runScript(client, script, keys(4), args(6))).rejects.toBeInstanceOf(BackendError);
    expect(sent).toBe(0);
    await runScript(client, script, keys(2), args(2)); // a free lock on a single Redis
    await runScript(client, script, keys(2), args(3)); // with a Redlock node's fence floor
    await runScript(client, script, keys(4), args(5)); // with the queue's keys and arguments
    expect(sent).toBe(3);
  });

  it("the fence counter's retention written into acquire.lua and release.lua is FENCE_RETENTION", () => {
    for (const script of [scripts.acquireScript, scripts.releaseScript]) {
      expect(/^local RETENTION = (\d+)$/m.exec(script.source)?.[1], script.name).toBe(String(FENCE_RETENTION));
    }
  });
});
