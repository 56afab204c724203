// Flat config: typescript-eslint's type-aware rules for src, plain recommended rules for scripts.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import globals from 'globals';

export default tseslint.config(
    { ignores: ['out/**', 'node_modules/**', '.e2e/**'] },
    js.configs.recommended,
    {
        files: ['src/**/*.ts'],
        extends: [...tseslint.configs.strictTypeChecked],
        languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
        rules: {
            eqeqeq: 'error',
            curly: 'error',
            '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true }],
            '@typescript-eslint/naming-convention': [
                'error',
                { selector: 'import', format: ['camelCase', 'PascalCase'] },
            ],
        },
    },
    {
        files: ['scripts/**/*.mjs', 'eslint.config.mjs'],
        languageOptions: { globals: { ...globals.node }, sourceType: 'module' },
    },
);
