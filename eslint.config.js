import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'bench/dist-*/**', 'bench/tmp-exp/**', 'node_modules/**', 'src/lua/scripts.generated.ts', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: {
        process: 'readonly', console: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly',
        setInterval: 'readonly', clearInterval: 'readonly', performance: 'readonly', AbortController: 'readonly',
        AbortSignal: 'readonly', URL: 'readonly', Buffer: 'readonly', setImmediate: 'readonly',
      },
    },
    rules: {
      'no-restricted-syntax': [
        'error',
        { selector: 'TSEnumDeclaration', message: 'Use string literal unions instead of enums.' },
        { selector: 'TSModuleDeclaration[kind="namespace"]', message: 'Use modules, not namespaces.' },
        { selector: 'ExportDefaultDeclaration', message: 'Named exports only.' },
      ],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
    },
  },
  {
    files: ['*.config.ts', '*.config.js'],
    rules: { 'no-restricted-syntax': 'off' },
  },
);
