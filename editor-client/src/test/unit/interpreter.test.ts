import * as assert from 'node:assert/strict';
import { formatCommand, notInstalledMessage, resolveServerCommand } from '../../common/interpreter';

describe('resolveServerCommand', () => {
    const none = { serverPath: [], interpreter: [], pythonExtensionInterpreter: undefined };

    it('uses kernelLsp.server.path as the whole command, ahead of everything else', () => {
        const command = resolveServerCommand({
            serverPath: ['/opt/bin/kernel-lsp', '--log', 'debug'],
            interpreter: ['/usr/bin/python3.12'],
            pythonExtensionInterpreter: ['/venv/bin/python'],
        });
        assert.deepEqual(command, {
            command: '/opt/bin/kernel-lsp',
            args: ['--log', 'debug'],
            source: 'kernelLsp.server.path',
            python: undefined,
        });
    });

    it('runs -I -m kernel_lsp with kernelLsp.interpreter, keeping its leading arguments', () => {
        const command = resolveServerCommand({
            ...none,
            interpreter: ['/usr/bin/python3', '-X', 'utf8'],
            pythonExtensionInterpreter: ['/venv/bin/python'],
        });
        assert.equal(command.command, '/usr/bin/python3');
        assert.deepEqual(command.args, ['-X', 'utf8', '-I', '-m', 'kernel_lsp']);
        assert.equal(command.source, 'kernelLsp.interpreter');
        assert.deepEqual(command.python, ['/usr/bin/python3', '-X', 'utf8']);
    });

    it("falls back to the Python extension's selected interpreter", () => {
        const command = resolveServerCommand({ ...none, pythonExtensionInterpreter: ['/venv/bin/python'] });
        assert.equal(command.command, '/venv/bin/python');
        assert.deepEqual(command.args, ['-I', '-m', 'kernel_lsp']);
        assert.equal(command.source, 'Python extension');
    });

    it('falls back to python3 on PATH when nothing is configured', () => {
        const command = resolveServerCommand(none);
        assert.equal(command.command, 'python3');
        assert.deepEqual(command.args, ['-I', '-m', 'kernel_lsp']);
        assert.equal(command.source, 'PATH');
        assert.deepEqual(command.python, ['python3']);
    });

    it('treats blank entries as not set', () => {
        const command = resolveServerCommand({
            serverPath: ['', '  '],
            interpreter: [''],
            pythonExtensionInterpreter: [],
        });
        assert.equal(command.source, 'PATH');
    });
});

describe('formatCommand and notInstalledMessage', () => {
    it('quotes parts with spaces', () => {
        assert.equal(formatCommand(['/My Python/python', '-m', 'kernel_lsp']), '"/My Python/python" -m kernel_lsp');
    });

    it('tells the user what to pip install into which interpreter', () => {
        const message = notInstalledMessage(resolveServerCommand({ serverPath: [], interpreter: ['/venv/bin/python'], pythonExtensionInterpreter: undefined }));
        assert.match(message, /\/venv\/bin\/python -m pip install -e <checkout>/);
        assert.doesNotMatch(message, /pip install kernel-lsp/); // no registry serves it
        assert.match(message, /clear kernelLsp\.interpreter/);
        const fromPath = notInstalledMessage(resolveServerCommand({ serverPath: [], interpreter: [], pythonExtensionInterpreter: undefined }));
        assert.match(fromPath, /python3 -m pip install -e <checkout>/);
        assert.match(fromPath, /choose another interpreter \(kernelLsp\.interpreter\)/);
    });
});
