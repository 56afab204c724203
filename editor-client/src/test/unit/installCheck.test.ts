import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkModuleImports } from '../../common/installCheck';

function hasPython3(): boolean {
    try {
        execFileSync('python3', ['--version']);
        return true;
    } catch {
        return false;
    }
}

describe('checkModuleImports', function () {
    const env = { PATH: process.env.PATH ?? '' };
    const options = { env, cwd: tmpdir() };

    it('reports an interpreter that cannot be run', async () => {
        const check = await checkModuleImports(['/nonexistent/python'], 'sys', options);
        assert.equal(check.kind, 'noInterpreter');
    });

    it('tells an importable module from a missing one', async function () {
        if (!hasPython3()) {
            this.skip();
        }
        assert.deepEqual(await checkModuleImports(['python3'], 'sys', options), { kind: 'ok' });
        const missing = await checkModuleImports(['python3'], 'no_such_module_for_kernel_lsp', options);
        if (missing.kind !== 'notImportable') {
            assert.fail(`expected notImportable, got ${missing.kind}`);
        }
        assert.match(missing.error, /ModuleNotFoundError/);
    });

    it('does not import a same-named package from its working directory (python -I)', async function () {
        if (!hasPython3()) {
            this.skip();
        }
        // A repository that ships its own `kernel_lsp_shadow/`: without -I, `python -c "import ..."`
        // would import it from the working directory and run its code.
        const workspace = mkdtempSync(join(tmpdir(), 'kernel-lsp-shadow-'));
        try {
            const marker = join(workspace, 'ran.marker');
            mkdirSync(join(workspace, 'kernel_lsp_shadow'));
            writeFileSync(
                join(workspace, 'kernel_lsp_shadow', '__init__.py'),
                `open(${JSON.stringify(marker)}, "w").write("workspace code ran")\n`,
            );
            // The control: plain python does import it from the working directory.
            execFileSync('python3', ['-c', 'import kernel_lsp_shadow'], { cwd: workspace, env });
            assert.ok(existsSync(marker), 'control: plain python should have imported the workspace package');
            rmSync(marker);

            const check = await checkModuleImports(['python3'], 'kernel_lsp_shadow', { env, cwd: workspace });
            assert.equal(check.kind, 'notImportable');
            assert.ok(!existsSync(marker), 'the workspace package ran');
        } finally {
            rmSync(workspace, { recursive: true, force: true });
        }
    });
});
