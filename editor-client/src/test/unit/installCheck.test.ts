import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
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

    it('reports an interpreter that cannot be run', async () => {
        const check = await checkModuleImports(['/nonexistent/python'], 'sys', env);
        assert.equal(check.kind, 'noInterpreter');
    });

    it('tells an importable module from a missing one', async function () {
        if (!hasPython3()) {
            this.skip();
        }
        assert.deepEqual(await checkModuleImports(['python3'], 'sys', env), { kind: 'ok' });
        const missing = await checkModuleImports(['python3'], 'no_such_module_for_kernel_lsp', env);
        if (missing.kind !== 'notImportable') {
            assert.fail(`expected notImportable, got ${missing.kind}`);
        }
        assert.match(missing.error, /ModuleNotFoundError/);
    });
});
