import * as assert from 'node:assert/strict';
import { COMPILE_ONLY, describeStatus, parseServerStatus } from '../../common/status';

describe('parseServerStatus', () => {
    it('accepts the documented shapes', () => {
        assert.deepEqual(parseServerStatus({ device: 'NVIDIA H100', busy: null }), { device: 'NVIDIA H100', busy: null });
        assert.deepEqual(parseServerStatus({ device: null, busy: 'checking', detail: 'a.cu' }), {
            device: null,
            busy: 'checking',
            detail: 'a.cu',
        });
        assert.deepEqual(parseServerStatus({ device: null }), { device: null, busy: null });
    });

    it('rejects malformed params', () => {
        assert.equal(parseServerStatus(null), undefined);
        assert.equal(parseServerStatus({ device: 3, busy: null }), undefined);
        assert.equal(parseServerStatus({ device: null, busy: 'sleeping' }), undefined);
    });
});

describe('describeStatus', () => {
    it('shows the device name when idle', () => {
        assert.equal(describeStatus({ device: 'NVIDIA H100', busy: null }).text, '$(chip) NVIDIA H100');
    });

    it('says compile-only when there is no device', () => {
        assert.equal(describeStatus({ device: null, busy: null }).text, `$(circle-slash) ${COMPILE_ONLY}`);
    });

    it('spins while busy and says why in the tooltip', () => {
        const shown = describeStatus({ device: null, busy: 'optimizing', detail: 'round 2/3' });
        assert.equal(shown.text, `$(sync~spin) ${COMPILE_ONLY}`);
        assert.match(shown.tooltip, /Optimizing/);
        assert.match(shown.tooltip, /round 2\/3/);
    });
});
