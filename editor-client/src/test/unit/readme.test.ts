import * as assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

// Compiled to out/test/unit/: the extension's folder is three levels up.
const clientDir = join(__dirname, '..', '..', '..');
const manifest = JSON.parse(readFileSync(join(clientDir, 'package.json'), 'utf8')) as {
    contributes: { configuration: { properties: Record<string, { default?: unknown }> } };
};
const readme = readFileSync(join(clientDir, 'README.md'), 'utf8');

/** The `## Settings` table: setting name → its Default cell, parsed as JSON. */
function readmeSettings(): Map<string, unknown> {
    const section = readme.split(/^## Settings$/m)[1]?.split(/^## /m)[0] ?? '';
    const rows = section.split('\n').filter((line) => /^\| `kernelLsp\./.test(line));
    return new Map(
        rows.map((row) => {
            const [name, defaultCell] = row.split('|').slice(1, 3).map((cell) => cell.trim().replace(/^`|`$/g, ''));
            return [name, JSON.parse(defaultCell) as unknown];
        }),
    );
}

describe("the README's settings table", () => {
    const documented = readmeSettings();
    const contributed = manifest.contributes.configuration.properties;

    it('lists every setting package.json contributes, and no other', () => {
        assert.ok(documented.size > 20, `found only ${documented.size} rows: the table's format changed`);
        assert.deepEqual([...documented.keys()].sort(), Object.keys(contributed).sort());
    });

    it('gives each default as package.json does', () => {
        for (const [name, schema] of Object.entries(contributed)) {
            assert.deepEqual(documented.get(name), schema.default, name);
        }
    });

    it('marks the settings a workspace cannot set', () => {
        for (const name of ['kernelLsp.server.path', 'kernelLsp.interpreter', 'kernelLsp.llm.baseUrl', 'kernelLsp.cluster.address']) {
            const row = readme.split('\n').find((line) => line.startsWith(`| \`${name}\``)) ?? '';
            assert.match(row, /User settings only/, name);
        }
    });
});

describe("the optimize action's wording", () => {
    // The server words "no GPU" once (kernel_lsp.evaluation.local.no_gpu_message) and the
    // extension shows its message as it is: the extension must not word it a second time.
    const sources = (dir: string): string[] =>
        readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
            entry.isDirectory()
                ? entry.name === 'test'
                    ? []
                    : sources(join(dir, entry.name))
                : entry.name.endsWith('.ts')
                  ? [join(dir, entry.name)]
                  : [],
        );

    it('has no "no GPU" text of its own except the status bar label', () => {
        const hits = sources(join(clientDir, 'src')).flatMap((file) =>
            readFileSync(file, 'utf8')
                .split('\n')
                .filter((line) => /no GPU|without a GPU|GPU (?:is )?(?:not|un)available/i.test(line))
                .map((line) => `${file}: ${line.trim()}`),
        );
        assert.deepEqual(
            hits.map((hit) => hit.replace(/^.*src[\\/]/, '')),
            ["common/status.ts: export const COMPILE_ONLY = 'compile-only (no GPU)';"],
        );
    });

    it("shows the server's own message for an optimization result", () => {
        const extension = readFileSync(join(clientDir, 'src', 'extension.ts'), 'utf8');
        const report = extension.slice(extension.indexOf('function reportOptimizeResult'));
        assert.match(report.slice(0, report.indexOf('\n}\n')), /show(?:Information|Warning)Message\(result\.message/);
    });
});
