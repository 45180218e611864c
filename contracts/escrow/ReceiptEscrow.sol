// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/**
 * @title ReceiptEscrow
 * @notice Reference escrow released by a gateway receipt. A payer deposits ether for a job, naming the payee,
 * the receipt kind the job must produce, the top-level payload field that carries the job id, and the
 * receipt signer it trusts (the address `GET /v1/receipts/pubkey` publishes). Anyone may then call `claim`
 * with a receipt: the contract checks on chain that the EIP-191 signature over the payload bytes recovers to
 * the trusted signer and that the payload binds to the job and the kind, and pays the payee once.
 *
 * Binding, checked byte for byte over the payload as signed (RFC 8785 canonical JSON, no whitespace):
 * - the payload is one JSON object: its first byte is `{` and its matching `}` is its last byte;
 * - among the object's top-level members (nested objects and arrays are skipped, strings are skipped with
 *   their escapes), the job-id field occurs exactly once, its `:` follows the key at once, and its value is
 *   the JSON string of the job id (the job id has no byte that JSON escapes, so that string is the job id
 *   between two quotes);
 * - an escrow kind that is not empty: the top-level member `kind` occurs exactly once and its value is the
 *   JSON string of the kind, the same way; an empty kind means the receipt declares none: no top-level
 *   member `kind` at all (not a wildcard).
 * Keys are compared as they are written in the payload; RFC 8785 writes every key the gateway uses without
 * escapes, so a key written with escapes does not count.
 *
 * The gateway's POST /v1/escrow/claims runs the same checks (control-plane/src/modules/escrow/check.ts) and
 * assembles the arguments of `claim`; see docs/escrow.md. This reference has no refund path: funds stay
 * until a matching receipt is claimed.
 */
contract ReceiptEscrow {
    struct Escrow {
        address payer;
        address payee;
        address signer;
        bool paid; // in the signer's slot: marking a claim paid rewrites a slot that is already set
        uint256 amount;
        string jobField;
        string kind;
    }

    /// secp256k1's group order n over 2: signatures with a higher s are refused (as the gateway's verifier does).
    uint256 private constant HALF_N = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0;

    /// Escrows by keccak256 of the job id's bytes; one escrow per job id.
    mapping(bytes32 => Escrow) private escrows;

    event Deposited(bytes32 indexed key, string jobId, address indexed payer, address indexed payee, uint256 amount, string jobField, string kind, address signer);
    event Claimed(bytes32 indexed key, string jobId, address indexed payee, uint256 amount);

    error InvalidTerms(string reason);
    error EscrowExists(string jobId);
    error NoEscrow(string jobId);
    error AlreadyPaid(string jobId);
    error BadSignature(address recovered);
    error NotBound(string reason);
    error PayoutFailed();

    /**
     * Opens the escrow of `jobId` with the ether sent. `jobId`, `jobField` and `kind` must not contain a byte
     * that JSON escapes (`"`, `\`, below 0x20); `jobField` is not empty and is not `kind`; `kind` may be empty
     * (the receipt must then declare no kind).
     */
    function deposit(string calldata jobId, string calldata jobField, string calldata kind, address payee, address signer) external payable returns (bytes32 key) {
        if (msg.value == 0) revert InvalidTerms("amount is zero");
        if (payee == address(0)) revert InvalidTerms("payee is the zero address");
        if (signer == address(0)) revert InvalidTerms("signer is the zero address");
        if (bytes(jobId).length == 0 || !_plain(bytes(jobId))) revert InvalidTerms("jobId is empty or has a byte JSON escapes");
        if (bytes(jobField).length == 0 || !_plain(bytes(jobField))) revert InvalidTerms("jobField is empty or has a byte JSON escapes");
        if (keccak256(bytes(jobField)) == keccak256("kind")) revert InvalidTerms("jobField cannot be kind");
        if (!_plain(bytes(kind))) revert InvalidTerms("kind has a byte JSON escapes");
        key = keccak256(bytes(jobId));
        if (escrows[key].payer != address(0)) revert EscrowExists(jobId);
        escrows[key] = Escrow({ payer: msg.sender, payee: payee, signer: signer, paid: false, amount: msg.value, jobField: jobField, kind: kind });
        emit Deposited(key, jobId, msg.sender, payee, msg.value, jobField, kind, signer);
    }

    /// The escrow of `jobId` (a zero payer: none).
    function escrowOf(string calldata jobId) external view returns (Escrow memory) {
        return escrows[keccak256(bytes(jobId))];
    }

    /**
     * Pays the escrow of `jobId` to its payee once, given a receipt: `payload` is the receipt's canonical JSON
     * bytes exactly as signed, `signature` its 65-byte EIP-191 signature (r || s || v).
     */
    function claim(string calldata jobId, bytes calldata payload, bytes calldata signature) external {
        bytes32 key = keccak256(bytes(jobId));
        Escrow storage e = escrows[key];
        if (e.payer == address(0)) revert NoEscrow(jobId);
        if (e.paid) revert AlreadyPaid(jobId);
        address recovered = recoverSigner(payload, signature);
        if (recovered == address(0) || recovered != e.signer) revert BadSignature(recovered);
        string memory why = bindingFailure(payload, e.jobField, jobId, e.kind);
        if (bytes(why).length != 0) revert NotBound(why);
        e.paid = true;
        uint256 amount = e.amount;
        (bool ok, ) = e.payee.call{ value: amount }("");
        if (!ok) revert PayoutFailed();
        emit Claimed(key, jobId, e.payee, amount);
    }

    /// The EIP-191 (personal_sign) signer of `payload`, or the zero address for a malformed or high-s signature.
    function recoverSigner(bytes calldata payload, bytes calldata signature) public pure returns (address) {
        if (signature.length != 65) return address(0);
        bytes32 r = bytes32(signature[0:32]);
        bytes32 s = bytes32(signature[32:64]);
        uint8 v = uint8(signature[64]);
        if (v < 27) v += 27;
        if (v != 27 && v != 28) return address(0);
        if (uint256(s) > HALF_N) return address(0);
        bytes32 digest = keccak256(abi.encodePacked("\x19Ethereum Signed Message:\n", _decimal(payload.length), payload));
        return ecrecover(digest, v, r, s);
    }

    /// Why `payload` does not bind to the job and the kind, or "" when it does (the checks in the contract's notice).
    function bindingFailure(bytes calldata payload, string memory jobField, string memory jobId, string memory kind) public pure returns (string memory) {
        Members memory m = _members(payload, bytes(jobField));
        if (!m.object) return "payload is not one JSON object";
        if (m.jobCount == 0) return "no top-level job-id field";
        if (m.jobCount > 1) return "job-id field occurs more than once";
        if (!_valueAt(payload, m.jobAt, bytes(jobId))) return "job-id value differs";
        if (bytes(kind).length == 0) {
            if (m.kindCount != 0) return "receipt declares a kind; the escrow expects none";
        } else {
            if (m.kindCount == 0) return "receipt declares no kind";
            if (m.kindCount > 1) return "kind occurs more than once";
            if (!_valueAt(payload, m.kindAt, bytes(kind))) return "kind differs";
        }
        return "";
    }

    /// What one pass over a payload found (see `_members`).
    struct Members {
        bool object;
        uint256 jobCount;
        uint256 jobAt;
        uint256 kindCount;
        uint256 kindAt;
    }

    /**
     * One pass over the payload: whether it is one object (first byte `{`, its match the last byte, no string
     * left open), how often the top-level keys `jobField` and `kind` occur, and the offset just after the
     * closing quote of the first occurrence of each. Outside strings it reads byte by byte: `{` and `[` open
     * a level, `}` and `]` close one, a `"` opens a string, which is a key when it opens at depth 1 where a
     * key is due (just after the `{` or a `,` of that level). Inside a string only `"` (the end) and `\`
     * (which skips the byte after it) matter, so strings are crossed a 32-byte word at a time. Assembly for
     * gas; docs/escrow.md and control-plane/src/modules/escrow/check.ts give the same scan byte by byte.
     */
    function _members(bytes calldata p, bytes memory jobField) private pure returns (Members memory m) {
        if (p.length < 2 || p[0] != "{") return m;
        bytes32 jobHash = keccak256(jobField);
        // m's words: object, jobCount, jobAt, kindCount, kindAt.
        assembly ("memory-safe") {
            // 0x80 in each byte of x that is zero, else 0 (no carry crosses a byte).
            function zeroBytes(x) -> z {
                let low7 := 0x7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f
                z := and(not(or(add(and(x, low7), low7), x)), not(low7))
            }
            // The index (0-31, from the first byte) of the first byte of s that is not zero; s is not zero.
            function firstByte(s) -> k {
                if iszero(shr(128, s)) { k := 16 s := shl(128, s) }
                if iszero(shr(192, s)) { k := add(k, 8) s := shl(64, s) }
                if iszero(shr(224, s)) { k := add(k, 4) s := shl(32, s) }
                if iszero(shr(240, s)) { k := add(k, 2) s := shl(16, s) }
                if iszero(shr(248, s)) { k := add(k, 1) }
            }
            // 0x80 in each byte of w that is '"' or "\\".
            function specials(w) -> s {
                s := or(zeroBytes(xor(w, 0x2222222222222222222222222222222222222222222222222222222222222222)), zeroBytes(xor(w, 0x5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c)))
            }
            // A top-level key from start to end (its closing quote) ends: count it if it is the job-id field or "kind".
            function keyEnds(mm, field, fieldHash, base, start, end) {
                let len := sub(end, start)
                if eq(len, mload(field)) {
                    calldatacopy(mload(0x40), add(base, start), len)
                    if eq(keccak256(mload(0x40), len), fieldHash) {
                        if iszero(mload(add(mm, 0x20))) { mstore(add(mm, 0x40), add(end, 1)) }
                        mstore(add(mm, 0x20), add(mload(add(mm, 0x20)), 1))
                        leave // counted as the job-id field, not also as kind
                    }
                }
                if eq(len, 4) {
                    if eq(shr(224, calldataload(add(base, start))), 0x6b696e64) { // "kind"
                        if iszero(mload(add(mm, 0x60))) { mstore(add(mm, 0x80), add(end, 1)) }
                        mstore(add(mm, 0x60), add(mload(add(mm, 0x60)), 1))
                    }
                }
            }
            let depth := 0
            let expectKey := 0
            let keyStart := 0 // in a string: 1 + where a key starts, or 1 for a string that is not a key
            mstore(m, 1)
            for { let i := 0 } lt(i, p.length) { i := add(i, 1) } {
                switch keyStart
                case 0 {
                    switch byte(0, calldataload(add(p.offset, i)))
                    case 0x22 { // '"'
                        keyStart := 1
                        if and(eq(depth, 1), expectKey) {
                            expectKey := 0
                            keyStart := add(i, 2)
                        }
                    }
                    case 0x2c { if eq(depth, 1) { expectKey := 1 } } // ","
                    case 0x7b { // "{"
                        depth := add(depth, 1)
                        if eq(depth, 1) { expectKey := 1 }
                    }
                    case 0x5b { depth := add(depth, 1) } // "[" (never at depth 0: the first byte is "{")
                    case 0x7d { // "}"
                        if iszero(depth) { mstore(m, 0) break }
                        depth := sub(depth, 1)
                        if and(iszero(depth), lt(add(i, 1), p.length)) { mstore(m, 0) break }
                    }
                    case 0x5d { // "]"
                        if iszero(depth) { mstore(m, 0) break }
                        depth := sub(depth, 1)
                        if and(iszero(depth), lt(add(i, 1), p.length)) { mstore(m, 0) break }
                    }
                }
                default {
                    // In a string: the next '"' or "\\" among the 32 bytes from i (none past the payload's end).
                    let s := specials(calldataload(add(p.offset, i)))
                    if lt(sub(p.length, i), 32) { s := and(s, not(shr(mul(8, sub(p.length, i)), not(0)))) }
                    switch s
                    case 0 { i := add(i, 31) } // none: the whole word is inside the string
                    default {
                        i := add(i, firstByte(s))
                        switch byte(0, calldataload(add(p.offset, i)))
                        case 0x5c { i := add(i, 1) } // "\\": the byte after it is escaped
                        default { // '"': the string ends
                            if gt(keyStart, 1) { keyEnds(m, jobField, jobHash, p.offset, sub(keyStart, 1), i) }
                            keyStart := 0
                        }
                    }
                }
            }
            if or(depth, keyStart) { mstore(m, 0) }
        }
        if (!m.object) return Members(false, 0, 0, 0, 0);
    }

    /// Whether the bytes at `offset` are `:` then the JSON string of `value` (a value with no byte JSON escapes).
    function _valueAt(bytes calldata p, uint256 offset, bytes memory value) private pure returns (bool) {
        uint256 end = offset + value.length + 3;
        if (end > p.length) return false;
        return keccak256(p[offset:end]) == keccak256(abi.encodePacked(':"', value, '"'));
    }

    /// No byte that JSON escapes: `"`, `\` or a control character below 0x20.
    function _plain(bytes memory s) private pure returns (bool) {
        for (uint256 i; i < s.length; ++i) {
            bytes1 c = s[i];
            if (c < 0x20 || c == '"' || c == "\\") return false;
        }
        return true;
    }

    function _decimal(uint256 v) private pure returns (bytes memory out) {
        if (v == 0) return "0";
        uint256 digits;
        for (uint256 t = v; t != 0; t /= 10) ++digits;
        out = new bytes(digits);
        for (; v != 0; v /= 10) out[--digits] = bytes1(uint8(48 + (v % 10)));
    }
}
