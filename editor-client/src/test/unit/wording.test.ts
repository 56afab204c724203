import * as assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

// Compiled to out/test/unit/: the extension's folder is three levels up.
const clientDir = join(__dirname, '..', '..', '..');

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
