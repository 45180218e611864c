import type { FRAMEWORKS } from './schemas.ts';

export type Framework = (typeof FRAMEWORKS)[number];

/** What an audit pack holds, as far as the evidence mapping refers to it. */
export interface EvidenceFacts {
  receipts: number;
  chainValid: boolean;
  kinds: string[];
  models: string[];
  keys: number;
  firstAt: string;
  lastAt: string;
}

type Status = 'evidence_present' | 'partial' | 'evidence_absent' | 'integrity_failed';
export interface EvidenceItem {
  control: string;
  title: string;
  evidence: string[];
  status: Status;
}

const NAMES: Record<Framework, string> = { eu_ai_act: 'EU AI Act (Regulation (EU) 2024/1689)', soc2: 'SOC 2 (AICPA Trust Services Criteria)' };

const present = (ok: boolean): Status => (ok ? 'evidence_present' : 'evidence_absent');

function chainItem(f: EvidenceFacts): string {
  return f.chainValid
    ? `hash chain of ${f.receipts} receipts recomputes: contiguous sequence, each prev_hash links the previous receipt, every signature recovers to the signer`
    : 'hash chain does NOT recompute: see integrity.failures';
}

function euAiAct(f: EvidenceFacts): EvidenceItem[] {
  const has = f.receipts > 0;
  return [
    {
      control: 'Art. 12(1)',
      title: 'Record-keeping: automatic recording of events (logs)',
      evidence: [`${f.receipts} receipts signed per billable request (EIP-191, secp256k1) at the time of each request`, chainItem(f)],
      status: !has ? 'evidence_absent' : f.chainValid ? 'evidence_present' : 'integrity_failed',
    },
    {
      control: 'Art. 12(2)',
      title: 'Logging for traceability and monitoring of operation',
      evidence: [
        'per-receipt route, model, key id, cost and timestamp',
        `models: ${f.models.length ? f.models.join(', ') : 'none recorded'}`,
        `receipt kinds: ${f.kinds.join(', ') || 'none'}`,
      ],
      status: present(has),
    },
    {
      control: 'Art. 19(1), Art. 26(6)',
      title: 'Keeping automatically generated logs for an appropriate period (at least six months)',
      evidence: [`receipts stored from ${f.firstAt} to ${f.lastAt}`, 'the retention period itself is set and kept by the provider or deployer, not shown by this pack'],
      status: has ? 'partial' : 'evidence_absent',
    },
  ];
}

function soc2(f: EvidenceFacts): EvidenceItem[] {
  const has = f.receipts > 0;
  return [
    {
      control: 'CC6.1',
      title: 'Logical access: requests are attributable to authenticated credentials',
      evidence: [`every receipt names the API key that authenticated its request (${f.keys} distinct key${f.keys === 1 ? '' : 's'})`],
      status: present(has && f.keys > 0),
    },
    {
      control: 'CC7.2',
      title: 'Monitoring of system components and operation for anomalies',
      evidence: ['a usage event and a signed receipt per billable request, with route, model, cost and timestamp', `${f.receipts} usage events in this run`],
      status: present(has),
    },
    {
      control: 'PI1.3',
      title: 'Processing integrity: processing records are complete and unaltered',
      evidence: [chainItem(f)],
      status: !has ? 'evidence_absent' : f.chainValid ? 'evidence_present' : 'integrity_failed',
    },
  ];
}

export function evidenceMapping(framework: Framework, facts: EvidenceFacts): { evidence_mapping: EvidenceItem[]; disclaimer: string } {
  return {
    evidence_mapping: framework === 'eu_ai_act' ? euAiAct(facts) : soc2(facts),
    disclaimer:
      `This is an evidence mapping, not a certification, audit opinion, conformity assessment or attestation of compliance with ${NAMES[framework]}. ` +
      'It lists where the metadata in this pack may support the named controls; it does not establish that any control is designed, implemented or operating effectively. ' +
      'That judgement belongs to a qualified auditor or notified body.',
  };
}
