import { defineConfig } from 'tsup';

/** What only the `latchkey` command uses: bundled into dist/cli.js, not dependencies of the package. */
const CLI_ONLY = ['commander', 'cli-table3', 'log-update', 'ms'];

export default defineConfig([
  {
    entry: ['src/index.ts'],
    format: ['esm', 'cjs'],
    dts: true,
    // No source maps in the package: they doubled its size, and point at sources it does not ship.
    sourcemap: false,
    clean: false, // `npm run build` empties dist first: the two builds run side by side
    target: 'node20',
    splitting: false,
  },
  {
    // The `latchkey` command (package.json "bin"): ESM only, with its own copy of the library and
    // of the command-line libraries it uses (devDependencies, bundled here), so that a project
    // that only uses the library installs none of them. The clients (peers) and OpenTelemetry's
    // API stay external: one copy, the project's.
    entry: { cli: 'src/cli/main.ts' },
    format: ['esm'],
    dts: false,
    sourcemap: false,
    noExternal: CLI_ONLY,
    clean: false,
    target: 'node20',
    splitting: false,
    // Bundled CommonJS (cli-table3) calls require() for Node's modules: give the ES module one.
    banner: { js: "#!/usr/bin/env node\nimport { createRequire as __latchkeyRequire } from 'node:module';\nconst require = __latchkeyRequire(import.meta.url);" },
  },
]);
