/**
 * The `latchkey` command, built (dist/cli.js) and spawned against a private redis-server: exec's
 * mutual exclusion, exit codes, the lease-lost and Ctrl-C paths, inspection commands, and the
 * live status line in a real terminal (tmux).
 */
import { spawn, execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, spawnCli, type CliRun } from '../helpers/cli-process.js';
import { rawClient } from '../helpers/harness.js';
import { RedisServer } from '../helpers/redis-server.js';

let server: RedisServer;
let raw: Redis;
let url: string;
const dir = mkdtempSync(join(tmpdir(), 'latchkey-cli-'));

beforeAll(async () => {
  server = await RedisServer.start();
  raw = rawClient(server);
  url = `redis://127.0.0.1:${server.port}`;
});
afterAll(async () => {
  raw.disconnect();
  await server.stop();
});

/** Spawns the command with REDIS_URL set to the test's server. */
const latchkey = (args: readonly string[], env: Record<string, string> = {}): CliRun => spawnCli(args, { REDIS_URL: url, ...env });

const sh = (script: string): string[] => ['--', 'sh', '-c', script];
const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('latchkey exec', () => {
  it('runs the command with the lock held and the fence in its environment, and exits with its code', async () => {
    const run = latchkey(['exec', 'cli:code', ...sh('echo "fence=$LATCHKEY_FENCE key=$LATCHKEY_KEY"; exit 7')]);
    const { code, stdout } = await run.done;
    expect(code).toBe(7);
    expect(stdout).toMatch(/^fence=\d+ key=cli:code$/m);
    expect(await raw.exists('latchkey:{cli:code}')).toBe(0);
  });

  it('reports a command killed by a signal as 128+N, and a missing command as 127', async () => {
    expect((await latchkey(['exec', 'cli:sig', ...sh('kill -KILL $$')]).done).code).toBe(137);
    const missing = await latchkey(['exec', 'cli:missing', '--', 'no-such-command-latchkey']).done;
    expect(missing.code).toBe(127);
    expect(missing.stderr).toContain('command not found');
  });

  it('two runs on one key never overlap: their output interleaves only in turn', async () => {
    const log = join(dir, 'turns.log');
    const script = 'echo "start $ID" >> "$LOG"; sleep 0.2; echo "end $ID" >> "$LOG"';
    const runs = [1, 2, 3, 4].map((id) => latchkey(['exec', 'cli:turns', ...sh(script)], { ID: String(id), LOG: log }));
    const codes = (await Promise.all(runs.map((r) => r.done))).map((r) => r.code);
    expect(codes).toEqual([0, 0, 0, 0]);
    const lines = readFileSync(log, 'utf8').trim().split('\n');
    expect(lines).toHaveLength(8);
    for (let i = 0; i < lines.length; i += 2) {
      const id = lines[i]!.replace('start ', '');
      expect(lines[i]).toBe(`start ${id}`);
      expect(lines[i + 1]).toBe(`end ${id}`);
    }
  });

  it('--no-wait returns the conflict code at once while the lock is held; --conflict-exit-code changes it', async () => {
    const holder = latchkey(['exec', 'cli:busy', ...sh('echo ready; exec sleep 30')]);
    await holder.printed('ready');
    const busy = await latchkey(['exec', '--no-wait', 'cli:busy', '--', 'true']).done;
    expect(busy.code).toBe(75);
    expect(busy.stderr).toContain(`"cli:busy" is held by ${hostname()} pid ${holder.child.pid}`);
    expect((await latchkey(['exec', '--no-wait', '--conflict-exit-code', '9', 'cli:busy', '--', 'true']).done).code).toBe(9);
    expect((await latchkey(['exec', '--wait', '300ms', 'cli:busy', '--', 'true']).done).code).toBe(75);
    holder.child.kill('SIGTERM');
    await holder.done;
  });

  it('stops the command and returns the lease-lost code when the lease is deleted behind its back', async () => {
    const run = latchkey(['exec', '--ttl', '1500', '--kill-after', '1s', 'cli:lost', ...sh('echo "ready $$"; exec sleep 30')]);
    await run.printed('ready');
    expect(await raw.del('latchkey:{cli:lost}')).toBe(1);
    const { code, stderr, stdout } = await run.done;
    expect(code).toBe(76);
    expect(stderr).toContain('lost the lock "cli:lost"');
    const pid = Number(/ready (\d+)/.exec(stdout)![1]);
    expect(isAlive(pid)).toBe(false);
  });

  it('a release that gets no answer after the command ended under the lock returns the command\'s code, not lease-lost', async () => {
    const own = await RedisServer.start();
    try {
      const run = latchkey(['exec', '--ttl', '1s', 'cli:mute', ...sh('echo ready; read line; exit 3')], { REDIS_URL: `redis://127.0.0.1:${own.port}` });
      await run.printed('ready');
      own.pause(); // the command ends now, while the lease is valid; its release is never answered
      run.child.stdin!.end('go\n');
      const { code, stderr } = await run.done;
      expect(stderr).toContain('could not release "cli:mute": Redis did not answer');
      expect(stderr).not.toContain('not fully protected');
      expect(code).toBe(3);
    } finally {
      own.resume();
      await own.stop();
    }
  });

  it('a command that ignores SIGTERM after the lease is lost is killed after --kill-after', async () => {
    const run = latchkey(['exec', '--ttl', '1500', '--kill-after', '500ms', 'cli:stubborn', ...sh("trap '' TERM; echo \"ready $$\"; exec sleep 30")]);
    await run.printed('ready');
    await raw.del('latchkey:{cli:stubborn}');
    const { code, stdout } = await run.done;
    expect(code).toBe(76);
    expect(isAlive(Number(/ready (\d+)/.exec(stdout)![1]))).toBe(false);
  });

  it('SIGINT (Ctrl-C) reaches the command, and the lock is released', async () => {
    const run = latchkey(['exec', 'cli:interrupt', ...sh('echo ready; exec sleep 30')]);
    await run.printed('ready');
    run.child.kill('SIGINT');
    expect((await run.done).code).toBe(130); // sleep died of SIGINT: 128 + 2
    expect(await raw.exists('latchkey:{cli:interrupt}')).toBe(0);
  });

  it('SIGINT while waiting gives up the wait with 130 and leaves no queue entry', async () => {
    const holder = latchkey(['exec', 'cli:wait-int', ...sh('echo ready; exec sleep 30')]);
    await holder.printed('ready');
    const waiter = latchkey(['exec', 'cli:wait-int', '--', 'true']);
    while ((await raw.zcard('latchkey:{cli:wait-int}:queue')) === 0) await new Promise((r) => setTimeout(r, 20));
    waiter.child.kill('SIGINT');
    const { code, stderr } = await waiter.done;
    expect(code).toBe(130);
    expect(stderr).toContain('interrupted');
    expect(await raw.zcard('latchkey:{cli:wait-int}:queue')).toBe(0);
    holder.child.kill('SIGTERM');
    await holder.done;
  });
});

describe('latchkey status, list, release', () => {
  it('list --json shows held locks with their holders; status says who holds one and exits 0 (3 when free)', async () => {
    const a = latchkey(['exec', 'cli:list:a', ...sh('echo ready; exec sleep 30')]);
    const b = latchkey(['exec', 'cli:list:b', ...sh('echo ready; exec sleep 30')]);
    await Promise.all([a.printed('ready'), b.printed('ready')]);
    const listed = await latchkey(['list', 'cli:list:*', '--json']).done;
    expect(listed.code).toBe(0);
    const rows = JSON.parse(listed.stdout) as Array<{ key: string; held: boolean; holder: { who: string } | null; ttl: number; fence: number }>;
    // `key`, as the table's column says, in list and status alike.
    expect(rows.every((r) => !('name' in r))).toBe(true);
    expect(JSON.parse((await latchkey(['status', 'cli:list:a', '--json']).done).stdout)).toMatchObject({ key: 'cli:list:a', held: true });
    expect(rows.map((r) => [r.key, r.holder?.who])).toEqual([
      ['cli:list:a', `${hostname()} pid ${a.child.pid}`],
      ['cli:list:b', `${hostname()} pid ${b.child.pid}`],
    ]);
    expect(rows.every((r) => r.held && r.ttl > 0 && r.fence > 0)).toBe(true);
    const table = await latchkey(['list', 'cli:list:*']).done;
    expect(table.stdout).toContain('cli:list:a');
    expect(table.stdout).toContain(`pid ${b.child.pid}`);
    const status = await latchkey(['status', 'cli:list:a']).done;
    expect(status.code).toBe(0);
    expect(status.stdout).toContain(`held by ${hostname()} pid ${a.child.pid}`);
    a.child.kill('SIGTERM');
    b.child.kill('SIGTERM');
    await Promise.all([a.done, b.done]);
    expect((await latchkey(['status', 'cli:list:a']).done).code).toBe(3);
  });

  it('watch prints the table again every interval until interrupted', async () => {
    const holder = latchkey(['exec', 'cli:watched', ...sh('echo ready; exec sleep 30')]);
    await holder.printed('ready');
    const watch = latchkey(['watch', 'cli:watched', '--interval', '200ms']);
    await watch.printed(`pid ${holder.child.pid}`);
    await watch.printed('every 200ms'); // the footer of a refresh
    holder.child.kill('SIGTERM');
    await holder.done;
    await watch.printed('(no locks held)');
    watch.child.kill('SIGINT');
    expect((await watch.done).code).toBe(0);
  });

  it('release needs --force, says whose lock it broke, and the holder then loses its lease', async () => {
    const holder = latchkey(['exec', '--ttl', '1500', 'cli:force', ...sh('echo ready; exec sleep 30')]);
    await holder.printed('ready');
    expect((await latchkey(['release', 'cli:force']).done).code).toBe(64);
    const forced = await latchkey(['release', '--force', 'cli:force']).done;
    expect(forced.code).toBe(0);
    expect(forced.stdout).toContain(`released "cli:force" by force (${hostname()} pid ${holder.child.pid}`);
    const broken = await holder.done;
    expect(broken.code).toBe(76);
    // Told that an operator broke it, not that the key "expired or was deleted".
    expect(broken.stderr).toContain('an operator force-released it');
    expect(broken.stderr).not.toContain('expired or was deleted');
    expect((await latchkey(['release', '--force', 'cli:force']).done).code).toBe(3);
  });

  it('says what is wrong in one line: an unreachable Redis (69), a bad duration or URL (64)', async () => {
    const down = await latchkey(['status', 'x', '--url', 'redis://127.0.0.1:1']).done;
    expect(down.code).toBe(69);
    expect(down.stderr.trim()).toMatch(/^latchkey: cannot connect to redis:\/\/127\.0\.0\.1:1: .*ECONNREFUSED/);
    const bad = await latchkey(['exec', '--wait', 'soon', 'x', '--', 'true']).done;
    expect(bad.code).toBe(64);
    expect(bad.stderr.trim()).toBe('latchkey: --wait: invalid duration "soon" (expected e.g. 30s, 5m, 1h or a number of milliseconds)');
    const secret = await latchkey(['status', 'x', '--url', 'http://user:hunter2@127.0.0.1:1']).done;
    expect(secret.code).toBe(64);
    expect(secret.stderr).not.toContain('hunter2');
    // A URL that does not parse (a port out of range, a '/' in the password) is not echoed whole:
    // its credentials are left out, given as an argument or in REDIS_URL.
    for (const url of ['redis://:hunter2@127.0.0.1:99999', 'redis://user:hun/ter2@127.0.0.1:1']) {
      for (const run of [latchkey(['status', 'x', '--url', url]), latchkey(['status', 'x'], { REDIS_URL: url })]) {
        const unparsed = await run.done;
        expect(unparsed.code).toBe(64);
        expect(unparsed.stderr).toMatch(/is not a URL/);
        expect(unparsed.stderr).not.toMatch(/hunter2|hun\/ter2|ter2/);
      }
    }
    const comma = await latchkey(['status', 'x', '--redlock', 'redis://u:hun,ter2@127.0.0.1:1,redis://127.0.0.1:2']).done;
    expect(comma.code).toBe(64);
    expect(comma.stderr).toMatch(/--redlock: URL \d is not a URL/);
    expect(comma.stderr).not.toMatch(/hun|ter2/);
    // A lock name the library refuses, and a refresh that would scan the keyspace in a tight loop.
    const empty = await latchkey(['status', '']).done;
    expect(empty.code).toBe(64);
    expect(empty.stderr).toMatch(/^latchkey: .*INVALID_OPTION/);
    const tight = await latchkey(['watch', '--interval', '0']).done;
    expect(tight.code).toBe(64);
    expect(tight.stderr).toBe('latchkey: --interval: at least 100ms, got 0ms\n');
    const http = await latchkey(['exec', '--url', 'http://x', 'x', '--', 'true']).done;
    expect(http.code).toBe(64);
    expect(http.stderr).toMatch(/^latchkey: --url: http:\/\/x.* is not a redis:\/\/ or rediss:\/\/ URL\n$/);
  });

  it('refuses --wait with --no-wait, in either order, and a --ttl below the library\'s 10 ms', async () => {
    for (const flags of [['--wait', '5m', '--no-wait'], ['--no-wait', '--wait', '5m']]) {
      const both = await latchkey(['exec', ...flags, 'x', '--', 'true']).done;
      expect(both.code).toBe(64);
      expect(both.stderr).toBe('latchkey: --wait and --no-wait contradict each other: give one (--no-wait is --wait 0)\n');
    }
    const short = await latchkey(['exec', '--ttl', '9ms', 'x', '--', 'true']).done;
    expect(short.code).toBe(64);
    expect(short.stderr).toBe('latchkey: --ttl: at least 10ms, got 9ms\n');
    // The library's minimum is the command's: 500 ms (refused before: the command asked for 1 s) is taken.
    const quick = await latchkey(['exec', '--ttl', '500ms', 'cli:short-ttl', '--', 'true']).done;
    expect(quick.code).toBe(0);
  });
});

describe('the client the command connects with', () => {
  it('uses node-redis when LATCHKEY_CLIENT=redis: the lock, the status, and an unreachable Redis (69) as with ioredis', async () => {
    const env = { LATCHKEY_CLIENT: 'redis' };
    const run = latchkey(['exec', 'cli:node-redis', ...sh('echo "fence=$LATCHKEY_FENCE"; exit 5')], env);
    const { code, stdout } = await run.done;
    expect(code).toBe(5);
    expect(stdout).toMatch(/^fence=\d+$/m);
    expect(await raw.exists('latchkey:{cli:node-redis}')).toBe(0);
    const holder = latchkey(['exec', 'cli:node-redis', ...sh('echo ready; exec sleep 30')], env);
    await holder.printed('ready');
    const held = await latchkey(['status', 'cli:node-redis'], env).done;
    expect(held.code).toBe(0);
    expect(held.stdout).toContain(`pid ${holder.child.pid}`);
    holder.child.kill('SIGTERM');
    expect((await holder.done).code).toBe(143);
    const down = await latchkey(['status', 'x', '--url', 'redis://127.0.0.1:1'], env).done;
    expect(down.code).toBe(69);
    expect(down.stderr.trim()).toMatch(/^latchkey: cannot connect to redis:\/\/127\.0\.0\.1:1: .*ECONNREFUSED/);
  });

  it.each(['ioredis', 'redis'])('locks by majority over --redlock with %s while one node is down', async (client) => {
    const second = await RedisServer.start();
    try {
      const urls = [url, second.url, 'redis://127.0.0.1:1'].join(',');
      const run = latchkey(['exec', '--redlock', urls, 'cli:redlock', ...sh('echo "fence=$LATCHKEY_FENCE"')], { LATCHKEY_CLIENT: client });
      const { code, stdout, stderr } = await run.done;
      expect(code, stderr).toBe(0);
      expect(stdout).toMatch(/^fence=\d+$/m);
    } finally {
      await second.stop();
    }
  });

  it('refuses an unknown LATCHKEY_CLIENT (64), and says what to install when no client package is there (1)', async () => {
    const bogus = await latchkey(['status', 'x'], { LATCHKEY_CLIENT: 'valkey' }).done;
    expect(bogus.code).toBe(64);
    expect(bogus.stderr.trim()).toBe('latchkey: LATCHKEY_CLIENT: "valkey" is not a client package (expected ioredis or redis)');

    // The built command in a project of its own: its dependencies, but neither ioredis nor redis.
    const project = mkdtempSync(join(tmpdir(), 'latchkey-cli-bare-'));
    mkdirSync(join(project, 'latchkey', 'dist'), { recursive: true });
    copyFileSync(CLI, join(project, 'latchkey', 'dist', 'cli.js'));
    copyFileSync(fileURLToPath(new URL('../../package.json', import.meta.url)), join(project, 'latchkey', 'package.json'));
    mkdirSync(join(project, 'node_modules'));
    const { dependencies } = JSON.parse(readFileSync(join(project, 'latchkey', 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    for (const dependency of Object.keys(dependencies)) {
      mkdirSync(dirname(join(project, 'node_modules', dependency)), { recursive: true });
      symlinkSync(realpathSync(fileURLToPath(new URL(`../../node_modules/${dependency}`, import.meta.url))), join(project, 'node_modules', dependency));
    }
    const bare = spawn(process.execPath, [join(project, 'latchkey', 'dist', 'cli.js'), 'status', 'x'], { env: { ...process.env, REDIS_URL: url } });
    let stderr = '';
    bare.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const [exitCode] = await once(bare, 'exit');
    rmSync(project, { recursive: true, force: true });
    expect(exitCode).toBe(1);
    expect(stderr.trim()).toBe(
      'latchkey: latchkey needs a Redis client installed beside it, ioredis or redis: npm install ioredis (with npx: npx -p latchkey -p ioredis latchkey …)',
    );
  });
});

describe('latchkey exec in a terminal', () => {
  it('shows a live status line while it waits: who holds the lock, for how long, and how long it has waited', async () => {
    const holder = latchkey(['exec', 'cli:tty', ...sh('echo ready; exec sleep 30')]);
    await holder.printed('ready');
    const socket = `latchkey-test-${process.pid}`;
    const tmux = (...args: string[]): string => execFileSync('tmux', ['-L', socket, ...args], { encoding: 'utf8' });
    const command = `REDIS_URL=${url} ${process.execPath} ${CLI} exec cli:tty -- echo got-it; sleep 30`;
    tmux('new-session', '-d', '-x', '160', '-y', '10', command);
    try {
      const screen = (): string => tmux('capture-pane', '-p');
      // The terminal is only observable by looking at it: poll the pane.
      const end = Date.now() + 10_000;
      while (!/waited \d+s/.test(screen()) && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
      const line = screen();
      expect(line).toContain(`latchkey: waiting for "cli:tty": held by ${hostname()} pid ${holder.child.pid} for`);
      expect(line).toMatch(/TTL \d+s left; waited \d+s/);
      holder.child.kill('SIGTERM');
      await holder.done;
      while (!screen().includes('got-it') && Date.now() < end + 5000) await new Promise((r) => setTimeout(r, 100));
      const after = screen();
      expect(after).toContain('got-it');
      expect(after).not.toContain('waiting for'); // the status line was erased
    } finally {
      tmux('kill-server');
    }
  });

  it('erases the status line when Ctrl-C ends the wait', async () => {
    const holder = latchkey(['exec', 'cli:tty-int', ...sh('echo ready; exec sleep 30')]);
    await holder.printed('ready');
    const socket = `latchkey-test-int-${process.pid}`;
    const tmux = (...args: string[]): string => execFileSync('tmux', ['-L', socket, ...args], { encoding: 'utf8' });
    const command = `REDIS_URL=${url} ${process.execPath} ${CLI} exec cli:tty-int -- true; echo "exited $?"; sleep 30`;
    // remain-on-exit: should the shell die of the Ctrl-C too, its pane stays to be looked at.
    tmux('new-session', '-d', '-x', '160', '-y', '10', command, ';', 'set-window-option', 'remain-on-exit', 'on');
    try {
      const screen = (): string => tmux('capture-pane', '-p');
      const end = Date.now() + 10_000;
      while (!/waited \d+s/.test(screen()) && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
      expect(screen()).toContain('latchkey: waiting for "cli:tty-int"');
      tmux('send-keys', 'C-c');
      while (!/exited \d+|Pane is dead/.test(screen()) && Date.now() < end + 5000) await new Promise((r) => setTimeout(r, 100));
      const after = screen();
      expect(after).toContain('latchkey: interrupted (SIGINT) while waiting for "cli:tty-int"');
      expect(after).not.toContain('waiting for "cli:tty-int":'); // the status line was erased
    } finally {
      tmux('kill-server');
      holder.child.kill('SIGTERM');
      await holder.done;
    }
  });
});
