#!/usr/bin/env python3
"""Writes the seed corpora testdata/fuzz/<target>/seed_* from testdata/ examples and the bad inputs of
docs/RELIABILITY.md and docs/workloads.md (run from the repository root; regression inputs found by fuzzing are
kept beside them as testdata/fuzz/<target>/regress_*, never rewritten here)."""
import glob
import json
import os
import random

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
U64 = 18446744073709551615


def read(path):
    with open(os.path.join(ROOT, path), 'rb') as f:
        return f.read()


def write(target, seeds):
    d = os.path.join(ROOT, 'testdata', 'fuzz', target)
    os.makedirs(d, exist_ok=True)
    for old in glob.glob(os.path.join(d, 'seed_*')):
        os.remove(old)
    for name, data in seeds.items():
        if isinstance(data, str):
            data = data.encode()
        with open(os.path.join(d, 'seed_' + name), 'wb') as f:
            f.write(data)


def js(o):
    return json.dumps(o)


def batch_seeds():
    spec = json.loads(read('testdata/gather_plan/spec3_batch_n4_ps16.json'))
    s = {'spec3': read('testdata/gather_plan/spec3_batch_n4_ps16.json')}
    def var(name, f):
        b = json.loads(js(spec))
        f(b)
        s[name] = js(b)
    var('n1_ps1', lambda b: b.update(shard_size=1, page_size=1, pages_per_rank=8, max_prefix_tokens=8, chunk_tokens=8,
                                       requests=[{'prefix_len': 2, 'seq_len': 5, 'pages': [1, 2, 3, 4, 5]}]))
    var('no_requests', lambda b: b.update(requests=[]))
    var('partial_page', lambda b: b['requests'][0].update(seq_len=b['requests'][0]['seq_len'] - 1))
    var('misaligned_prefix', lambda b: b['requests'][0].update(prefix_len=17))
    var('non_cyclic', lambda b: b['requests'][0]['pages'].__setitem__(1, b['requests'][0]['pages'][0]))
    var('prefix_capacity', lambda b: b.update(max_prefix_tokens=0))
    var('chunk_capacity', lambda b: b.update(chunk_tokens=16))
    var('chunk_not_fresh', lambda b: b['requests'][0]['pages'].__setitem__(-1, b['requests'][0]['pages'][0]))
    var('pool_pages_per_rank', lambda b: b.update(pool_pages_per_rank=b.pop('pages_per_rank')))
    var('unknown_key', lambda b: b.update(shard_sise=4))
    var('unknown_request_key', lambda b: b['requests'][0].update(page=1))
    var('page_u64', lambda b: b['requests'][0]['pages'].__setitem__(0, U64))
    var('seq_len_u64', lambda b: b['requests'][0].update(seq_len=U64))
    var('ppr_limit', lambda b: b.update(pages_per_rank=(1 << 24) // 4 - 2))
    var('ppr_over', lambda b: b.update(pages_per_rank=(1 << 24) // 4 - 1))
    # ps = 2^20 with one rank: the plan's send_rows are 2^20 rows (the output grows as N * block_pages * ps).
    var('ps_max', lambda b: b.update(shard_size=1, page_size=1 << 20, max_prefix_tokens=1 << 20, chunk_tokens=2 << 20,
                                     requests=[{'prefix_len': 1 << 20, 'seq_len': 3 << 20, 'pages': [5, 6, 7]}]))
    var('n_max', lambda b: b.update(shard_size=1 << 16, pages_per_rank=1, max_prefix_tokens=0, chunk_tokens=16,
                                    requests=[]))
    var('float_len', lambda b: b['requests'][0].update(seq_len=12.5))
    var('negative', lambda b: b.update(chunk_tokens=-16))
    text = read('testdata/gather_plan/spec3_batch_n4_ps16.json').decode()
    s['dup_request_key'] = text.replace('"prefix_len"', '"pages": [], "prefix_len"', 1)
    s['truncated'] = text[: len(text) // 2]
    s['empty'] = ''
    s['array'] = '[]'
    s['null'] = 'null'
    s['nul_byte'] = '{"shard_size": 4\x00}'
    s['big_number'] = text.replace('"shard_size": 4', '"shard_size": 100000000000000000000', 1)
    return s


def alloc_seeds():
    text = read('testdata/alloc/spec2_script_n4_ps16.json').decode()
    spec = json.loads(text)
    s = {'spec2': text}
    def var(name, f):
        b = json.loads(text)
        f(b)
        s[name] = js(b)
    s['need_srot'] = text.replace('"need_sort"', '"need_srot"', 1)
    var('op_unknown_key', lambda b: b['ops'][3].update(need_srot=True))
    var('locs_on_alloc', lambda b: b['ops'][0].update(locs=[1]))
    s['dup_need_sort'] = text.replace('"need_sort": false,', '"need_sort": false, "need_sort": true,', 1)
    s['dup_op_key'] = js({**spec, 'ops': []}).replace('"ops": []', '"ops": [{"op": "free", "locs": [1], "locs": [2]}]')
    var('free_u64', lambda b: b.update(ops=[{'op': 'free', 'locs': [U64]}]))
    var('n1_ps1', lambda b: b.update(shard_size=1, page_size=1, pages_per_rank=4,
                                     ops=[{'op': 'alloc', 'prefix_lens': [0], 'seq_lens': [3], 'rotation_bases': [None],
                                           'last_locs': [0]}, {'op': 'free', 'locs': [1, 2]}]))
    var('need_sort', lambda b: b.update(need_sort=True))
    var('no_check_last_loc', lambda b: b.update(check_last_loc=False))
    var('exhaust', lambda b: b.update(ops=[{'op': 'alloc', 'prefix_lens': [0], 'seq_lens': [100000],
                                            'rotation_bases': [None], 'last_locs': [0]}]))
    var('bad_base', lambda b: b['ops'][0].update(rotation_bases=[4]))
    var('bad_last_loc', lambda b: b['ops'][2].update(last_locs=[176]))
    var('ppr0', lambda b: b.update(pages_per_rank=0))
    var('ppr_limit', lambda b: b.update(pages_per_rank=(1 << 24) // 4 - 1, ops=[]))
    var('free_trash', lambda b: b.update(ops=[{'op': 'free', 'locs': [0, 1, 2]}]))
    var('double_free', lambda b: b.update(ops=[b['ops'][0], {'op': 'free', 'locs': [64]}, {'op': 'free', 'locs': [64]}]))
    var('free_group_empty', lambda b: b.update(ops=[{'op': 'free_group', 'frees': []}]))
    var('lens_mismatch', lambda b: b['ops'][0].update(seq_lens=[1, 2]))
    var('unknown_op', lambda b: b['ops'][0].update(op='realloc'))
    var('prefix_gt_seq', lambda b: b['ops'][2].update(prefix_lens=[256]))
    s['empty'] = ''
    s['truncated'] = text[:100]
    return s


def trace_seeds():
    s = {}
    for p in sorted(glob.glob(os.path.join(ROOT, 'testdata/traces/*.jsonl'))):
        lines = open(p).read().splitlines()
        name = os.path.basename(p)[:-6]
        s[name] = '\n'.join(lines[:120]) + '\n'
        for i, line in enumerate(lines[1:40], 1):
            s[f'{name}_{i:02d}'] = lines[0] + '\n' + line + '\n'
    spec = open(os.path.join(ROOT, 'testdata/traces/spec_examples.jsonl')).read().splitlines()
    s['header_dup'] = '{"kvshard_trace": 1, "kvshard_trace": 1, "allocator": {"shard_size": 4, "page_size": 16, ' \
                      '"pages_per_rank": 32, "need_sort": false}}\n'
    s['expect_dup'] = spec[0] + '\n' + spec[1].replace('"expect": {', '"expect": {"pages": [], "pages": [], ', 1) + '\n'
    s['header_only'] = spec[0] + '\n'
    s['version2'] = spec[0].replace('"kvshard_trace": 1', '"kvshard_trace": 2') + '\n'
    s['empty'] = ''
    s['blank_line'] = spec[0] + '\n\n' + spec[1] + '\n'
    s['crlf'] = '\r\n'.join(spec[:3]) + '\r\n'
    # A recorder's meta on a record, one that is no object, and a last record cut mid-write (no newline).
    s['meta'] = spec[0] + '\n' + spec[1][:-1] + ', "meta": {"rids": ["req-1"], "rank": 0, "step": 3}}\n'
    s['meta_not_object'] = spec[0] + '\n' + spec[1][:-1] + ', "meta": ["req-1"]}\n'
    s['truncated_last'] = '\n'.join(spec[:3]) + '\n' + spec[3][:40]
    return s


def workload_seeds():
    # Byte 0 picks the format: 0 auto, 1 mooncake, 2 azure, 3 burstgpt, 4 qwen.
    moon = read('testdata/workloads/mooncake_conversation_trace.jsonl').decode().splitlines()
    azure = read('testdata/workloads/azure2023_AzureLLMInferenceTrace_code.csv').decode().splitlines()
    burst = ['Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type',
             '5,ChatGPT,472,18,490,Conversation log', '45.25,GPT-4,1000,0,1000,API log',
             '46,"Chat""GPT",1,2,3,"Conversation log"']
    qwen = ['{"chat_id": 159, "parent_chat_id": -1, "timestamp": 61.114, "input_length": 33, "output_length": 132, '
            '"type": "text", "turn": 1, "hash_ids": [1089, 1090, 1091]}',
            '{"chat_id": 160, "parent_chat_id": 159, "timestamp": 62.5, "input_length": 16, "output_length": 1, '
            '"type": "search", "turn": 2, "hash_ids": [1089]}']
    s = {}
    for fmt, name, lines in [(1, 'mooncake', moon[:6]), (2, 'azure', azure[:6]), (3, 'burstgpt', burst),
                             (4, 'qwen', qwen)]:
        body = '\n'.join(lines) + '\n'
        s[name] = bytes([fmt]) + body.encode()
        s[name + '_auto'] = b'\x00' + body.encode()
        s[name + '_crlf'] = bytes([fmt]) + body.replace('\n', '\r\n').encode()
        s[name + '_bom'] = bytes([fmt]) + b'\xef\xbb\xbf' + body.encode()
        s[name + '_header_only'] = bytes([fmt]) + (lines[0] + '\n').encode()
    m0 = moon[0]
    bad = {
        'empty': (0, ''),
        'blank': (0, '  \n\t\n'),
        'unknown_first_line': (0, 'hello\n'),
        'short_header': (2, 'TIMESTAMP,ContextTokens\n'),
        'broken_json': (1, '{"timestamp": 0, "input_length": 6\n'),
        'array': (1, m0 + '\n[1,2]\n'),
        'extra_key': (1, m0[:-1] + ', "model": 1}\n'),
        'dup_key': (1, '{"timestamp": 0, "timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [0]}\n'),
        'missing_key': (1, '{"timestamp": 0, "input_length": 1, "output_length": 1}\n'),
        'negative_len': (1, '{"timestamp": 0, "input_length": -5, "output_length": 1, "hash_ids": []}\n'),
        'fraction_len': (1, '{"timestamp": 0, "input_length": 600.0, "output_length": 1, "hash_ids": [0, 1]}\n'),
        'few_hashes': (1, '{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [0]}\n'),
        'negative_hash': (1, '{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [0, -1]}\n'),
        'backwards': (1, '\n'.join([m0, m0.replace('"timestamp": 0', '"timestamp": 2000'),
                                    m0.replace('"timestamp": 0', '"timestamp": 1500')]) + '\n'),
        'u64_len': (1, '{"timestamp": 0, "input_length": %d, "output_length": 1, "hash_ids": []}\n' % U64),
        'columns': (2, azure[0] + '\n2023-11-16 18:17:03.9799600,4808\n'),
        'bad_date': (2, azure[0] + '\n2023/11/16 18:17:03,1,1\n'),
        'no_such_date': (2, azure[0] + '\n2023-02-29 00:00:00,1,1\n'),
        'leap_day': (2, azure[0] + '\n2024-02-29 23:59:59.9999999,1,1\n2024-03-01 00:00:00,2,2\n'),
        'count_junk': (2, azure[0] + '\n2023-11-16 18:17:03,12a,1\n'),
        'burst_total': (3, burst[0] + '\n5,ChatGPT,472,18,500,Conversation log\n'),
        'broken_quote': (3, burst[0] + '\n"5,ChatGPT,472,18,490,Conversation log\n'),
        'far_arrival': (3, burst[0] + '\n0,ChatGPT,1,1,2,x\n1000000000,ChatGPT,1,1,2,x\n'),
        'max_len': (1, '{"timestamp": 0, "input_length": 2147483648, "output_length": 2147483648, "hash_ids": []}\n'),
        'qwen_turn0': (4, qwen[0].replace('"turn": 1', '"turn": 0') + '\n'),
        'control_bytes': (2, azure[0] + '\n\x01\x7f,1,1\n'),
    }
    for name, (fmt, text) in bad.items():
        s[name] = bytes([fmt]) + text.encode()
    return s


def calibration_seeds():
    text = read('testdata/calibration/h200.json').decode()
    cal = json.loads(text)
    s = {'h200': text}
    small = {'kvshard_calibration': 1, 'device': 'test', 'limits': cal['limits'],
             'rows': [r for r in cal['rows'] if r.get('op') == 'copy'][:8]}
    s['small'] = js(small)
    def var(name, f):
        b = json.loads(js(small))
        f(b)
        s[name] = js(b)
    var('one_row', lambda b: b.update(rows=b['rows'][:1]))
    var('same_size', lambda b: b.update(rows=[dict(b['rows'][0]), dict(b['rows'][0])]))
    var('no_limits', lambda b: b.pop('limits'))
    var('version2', lambda b: b.update(kvshard_calibration=2))
    var('unknown_key', lambda b: b.update(extra=1))
    var('unknown_op', lambda b: b['rows'][0].update(op='teleport'))
    var('negative_time', lambda b: b['rows'][0].update(time_us=-1))
    var('zero_size', lambda b: b['rows'][0].update(x=0))
    var('no_rows', lambda b: b.update(rows=[]))
    var('tiny_times', lambda b: [r.update(time_us=1e-300) for r in b['rows']])
    var('huge_sizes', lambda b: [r.update(x=1e300 * (i + 1)) for i, r in enumerate(b['rows'])])
    var('knee', lambda b: b.update(rows=[{**b['rows'][0], 'x': float(1 << k), 'time_us': 5 + (1 << k) * (1 if k < 5 else 9)}
                                          for k in range(10)]))
    s['truncated'] = text[:500]
    s['empty'] = ''
    return s


def cli_seeds():
    s = {}
    lines = []
    for line in read('testdata/cp/golden_commands.txt').decode().splitlines():
        if '|' in line and not line.startswith('#'):
            lines.append(line.split('|', 1)[1])
    lines += [
        'place --locs 1,2,3 --json', 'place --shard-size 18446744073709551615 --locs 1',
        'place --locs 18446744073709551615', 'place --locs-file testdata/placement/token_slots.txt --shard-rank 3',
        'place --locs-file /tmp', 'place --locs-file /dev/null', 'place --locs 1 --backend gpu', 'place --rank 1 --locs 5',
        'rerange --cp-size 2 --page-size 16 --extend-lens 281474976710656',
        'rerange --cp-size 4 --page-size 16 --extend-lens 100,7,64,33,1 --max-memory 1000',
        'split --mode round-robin --cp-size 2 --extend-lens 281474976710656',
        'split --cp-size 4 --page-size 4 --extend-lens 37 --max-memory 1000', 'rerange --cp-size 2 --page-size 4 --extend-lens 1 --max-memory 0',
        'split --cp-size 65537 --page-size 1 --extend-lens 1', 'split --cp-size 2 --page-size 4 --extend-lens  --json',
        'split --mode token-balanced --cp-size 3 --total-len 0', 'split --cp-size 2 --page-size 4 --extend-lens 1,2 --prefix-lens 4',
        'alloc --script testdata/alloc/spec2_script_n4_ps16.json --json', 'alloc --script /tmp',
        'gather-plan --batch testdata/gather_plan/spec3_batch_n4_ps16.json --translate 0,17,400 --json',
        'gather-plan --batch testdata/gather_plan/spec3_batch_n4_ps16.json --impl fast',
        'replay testdata/traces/spec_examples.jsonl --json', 'replay testdata/traces/pool_pipeline.jsonl --keep-going',
        'gen --records 5 --seed 3', 'gen --records 20 --edge-heavy --shard-size 1 --page-size 1',
        'gen --records 3 --no-radix --layers 0', 'gen --records 0',
        'calibrate testdata/calibration/h200.json', 'calibrate - --json',
        'simulate testdata/workloads/mooncake_conversation_trace.jsonl --shard-size 2 --json --quiet',
        'simulate - --format azure --quiet', 'simulate - --sweep shard-size=1,2 --quiet',
        'simulate - --time-scale 0 --quiet --cp-size 2', 'simulate - --kv-transfer-gbps 1e-9 --quiet',
        '--help', '--version', '', 'bogus', 'place --help', 'split -h', 'replay', 'split --cp-size=2 --page-size=1 --extend-lens=3',
        'split --cp-size 2 --cp-size 3', 'place --locs 1 --bogus', 'place --sh 2 --locs 1',
    ]
    for i, line in enumerate(lines):
        s[f'{i:02d}'] = line
    # With standard input after the NUL byte.
    moon = '\n'.join(read('testdata/workloads/mooncake_conversation_trace.jsonl').decode().splitlines()[:4]) + '\n'
    stdin_cases = {
        'alloc_stdin': ('alloc --script -', read('testdata/alloc/spec2_script_n4_ps16.json')),
        'batch_stdin': ('gather-plan --batch - --json', read('testdata/gather_plan/spec3_batch_n4_ps16.json')),
        'trace_stdin': ('replay - --impl fast', read('testdata/traces/spec_examples.jsonl')),
        'locs_stdin': ('place --locs-file -', b'1 2,3\nx\x01\x7fy\xc3\xa9'),
        'sim_stdin': ('simulate - --quiet --json', moon.encode()),
        'sim_cp_stdin': ('simulate - --quiet --cp-size 4 --page-size 16 --cache-tokens 1000', moon.encode()),
        'cal_stdin': ('calibrate -', read('testdata/calibration/h200.json')[:3000]),
    }
    for name, (line, data) in stdin_cases.items():
        s[name] = line.encode() + b'\x00' + data
    return s


def binary_seeds(name, count, rng):
    return {f'{name}_{i:02d}': bytes(rng.randrange(256) for _ in range(rng.choice([8, 24, 48, 96, 160])))
            for i in range(count)}


def main():
    rng = random.Random(13)
    write('batch', batch_seeds())
    write('alloc_script', alloc_seeds())
    write('trace', trace_seeds())
    write('workload', workload_seeds())
    write('calibration', calibration_seeds())
    write('cli', cli_seeds())
    cp = binary_seeds('random', 24, rng)
    # cp_size 4, page 16, rank 2, batch 5, prefix page multiples (Decode's byte order; see fuzz/cp_plan_fuzz.cc).
    cp['b5_n4_ps16'] = bytes([1, 3, 0, 0, 0, 1, 15, 0, 0, 0, 1, 2, 0, 0, 0, 1, 5, 0, 0, 0, 1]) + bytes(
        [1, 100, 0, 0, 0, 0, 0, 0, 0, 1, 7, 0, 0, 0, 1, 0, 0, 0, 1, 64, 0, 0, 0, 2, 0, 0, 0, 1, 33, 0, 0, 0, 3, 0, 0, 0,
         1, 1, 0, 0, 0, 0, 0, 0, 0])
    write('cp_plan', cp)
    write('gather_planner', binary_seeds('random', 24, rng))
    write('placement', binary_seeds('random', 16, rng))


if __name__ == '__main__':
    main()
