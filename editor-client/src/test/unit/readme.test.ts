import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
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
