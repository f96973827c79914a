#!/usr/bin/env python3
"""bench/html_bench.py - diagrams and the HTML report on generated transformers (issue 18).

For modules of about 100, 1k, 10k and 100k instructions (bench/gen_transformer.py), times
  viz before   shardlens viz T.db --before B.svg   (the default --max-nodes and layout budget)
  viz after    shardlens viz T.db --after A.svg
  html         shardlens html T.db -o report.html  (both views and, collapsed, neighbourhoods)
and for each page its size and when it is interactive in headless Chromium: the page's script
stamps performance.now() on <body data-ready> when everything is drawn and wired, and
`chromium --dump-dom` prints it (so the figure is from navigation start, parsing included).
With --screenshots DIR, 1280x800 screenshots of each page (report_SIZE.png) and of its graph
panel alone (graph_SIZE.png) go there.
Benchmarks, not tests: nothing here runs under `meson test`.

usage: bench/html_bench.py [--bin SHARDLENS] [--sizes 100,1k,10k,100k] [--workdir DIR]
                           [--screenshots DIR]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LAYERS = {'100': 1, '1k': 12, '10k': 126, '100k': 1265}
CHROME_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
                '--disable-background-networking', '--disable-component-update', '--disable-sync',
                '--hide-scrollbars']


def timed(cmd):
    t = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    dt = time.monotonic() - t
    if p.returncode:
        sys.exit('%s failed:\n%s' % (' '.join(cmd), p.stderr))
    return dt, p.stderr


def chromium():
    return shutil.which('chromium') or sys.exit('chromium is not installed')


def ready_ms(page, work):
    prof = tempfile.mkdtemp(dir=work, prefix='prof-')
    p = subprocess.run([chromium()] + CHROME_FLAGS + ['--user-data-dir=' + prof,
                        '--window-size=1280,800', '--dump-dom', 'file://' + page],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    m = re.search(r'<body data-ready="(\d+)"', p.stdout)
    return int(m.group(1)) if m else None


def screenshot(page, png, work):
    prof = tempfile.mkdtemp(dir=work, prefix='prof-')
    subprocess.run([chromium()] + CHROME_FLAGS + ['--user-data-dir=' + prof,
                    '--window-size=1280,800', '--virtual-time-budget=5000',
                    '--screenshot=' + png, 'file://' + page],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bin', default=os.path.join(HERE, '..', 'build', 'shardlens'))
    ap.add_argument('--sizes', default='100,1k,10k,100k')
    ap.add_argument('--workdir')
    ap.add_argument('--screenshots')
    a = ap.parse_args()
    work = a.workdir or tempfile.mkdtemp(prefix='shardlens-html-bench-')
    os.makedirs(work, exist_ok=True)
    print('| size | instructions | viz before s | viz after s | html s | page MB | interactive ms | notes |')
    print('| --- | --- | --- | --- | --- | --- | --- | --- |')
    for s in a.sizes.split(','):
        hlo = os.path.join(work, 't%s.hlo' % s)
        if not os.path.exists(hlo):
            subprocess.run([sys.executable, os.path.join(HERE, 'gen_transformer.py'), '--layers',
                            str(LAYERS[s]), '-o', hlo], check=True)
        n = sum(1 for line in open(hlo) if ' = ' in line)
        db = os.path.join(work, 't%s.db' % s)
        if os.path.exists(db):
            os.remove(db)
        subprocess.run([a.bin, 'partition', hlo, '--trace', db], stdout=subprocess.DEVNULL,
                       check=True)
        tb, nb = timed([a.bin, 'viz', db, '--before', os.path.join(work, 'b%s.svg' % s)])
        ta, na = timed([a.bin, 'viz', db, '--after', os.path.join(work, 'a%s.svg' % s)])
        page = os.path.join(work, 'report%s.html' % s)
        th, _ = timed([a.bin, 'html', db, '-o', page])
        size = os.path.getsize(page) / 1e6
        ms = ready_ms(page, work)
        notes = '; '.join(x.split('note: ')[-1][:60] for x in (nb + na).splitlines() if 'note' in x)
        print('| %s | %d | %.2f | %.2f | %.2f | %.2f | %s | %s |' % (s, n, tb, ta, th, size, ms, notes))
        if a.screenshots:
            os.makedirs(a.screenshots, exist_ok=True)
            screenshot(page, os.path.join(a.screenshots, 'report_%s.png' % s), work)
            # the graph panel alone (the rest of the page hidden by a style added to a copy)
            graph_only = os.path.join(work, 'graph%s.html' % s)
            text = open(page, encoding='utf-8').read().replace(
                '</head>', '<style>main>section:not(#graph-panel){display:none}'
                '#graph{height:680px}</style></head>', 1)
            open(graph_only, 'w', encoding='utf-8').write(text)
            screenshot(graph_only, os.path.join(a.screenshots, 'graph_%s.png' % s), work)


if __name__ == '__main__':
    main()
