#!/usr/bin/env python3
"""bench/html_bench.py - diagrams and the HTML report on generated transformers (issue 18).

For the MLP sample (three of its shardings taken out, so that propagation fills them in) and
modules of about 100, 1k, 10k and 100k instructions (bench/gen_transformer.py), times
  viz before   shardlens viz T.db --before B.svg   (the default --max-nodes and layout budget)
  viz after    shardlens viz T.db --after A.svg
  html         shardlens html T.db -o report.html  (both views; collapsed: the group tree, each
               group's diagram within the page's budgets) - wall and CPU seconds
and for each page its size and when it is interactive in headless Chromium: the page's script
stamps performance.now() on <body data-ready> when everything is drawn and wired, and
`chromium --dump-dom` prints it (so the figure is from navigation start, parsing included).
With --screenshots DIR, 1280x800 screenshots of each page go there (shoot() says which).
Benchmarks, not tests: nothing here runs under `meson test`.

usage: bench/html_bench.py [--bin SHARDLENS] [--sizes sample,100,1k,10k,100k] [--workdir DIR]
                           [--screenshots DIR]
"""
import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LAYERS = {'100': 1, '1k': 12, '10k': 126, '100k': 1265}  # 'sample': the MLP sample
CHROME_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
                '--disable-background-networking', '--disable-component-update', '--disable-sync',
                '--hide-scrollbars']


def timed(cmd):
    """Runs cmd; returns (wall seconds, CPU seconds of the child, stderr)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    dt = time.monotonic() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        sys.exit('%s failed:\n%s' % (' '.join(cmd), p.stderr))
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return dt, cpu, p.stderr


def chromium():
    return shutil.which('chromium') or sys.exit('chromium is not installed')


def ready_ms(page, work):
    prof = tempfile.mkdtemp(dir=work, prefix='prof-')
    p = subprocess.run([chromium()] + CHROME_FLAGS + ['--user-data-dir=' + prof,
                        '--window-size=1280,800', '--dump-dom', 'file://' + page],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    m = re.search(r'<body[^>]* data-ready="(\d+)"', p.stdout)
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
    print('| size | instructions | viz before s | viz after s | html s (CPU s) | page MB | '
          'interactive ms | first view |')
    print('| --- | --- | --- | --- | --- | --- | --- | --- |')
    for s in a.sizes.split(','):
        hlo = os.path.join(work, 't%s.hlo' % s)
        mesh = []
        if s == 'sample':
            # the MLP sample with three shardings taken out, so that propagation fills them in
            # and the page has origins to show
            text = open(os.path.join(HERE, '..', 'samples', 'mlp_megatron.hlo')).read()
            text = '\n'.join(re.sub(r', sharding=\{devices=\[1,4\]<=\[4\]\}', '', line)
                             if re.search(r'dot\.4 |broadcast\.6|maximum\.7', line) else line
                             for line in text.split('\n'))
            open(hlo, 'w').write(text)
            mesh = ['--mesh', 'data=2,model=2']
        elif not os.path.exists(hlo):
            subprocess.run([sys.executable, os.path.join(HERE, 'gen_transformer.py'), '--layers',
                            str(LAYERS[s]), '-o', hlo], check=True)
        n = sum(1 for line in open(hlo) if ' = ' in line)
        db = os.path.join(work, 't%s.db' % s)
        if os.path.exists(db):
            os.remove(db)
        subprocess.run([a.bin, 'partition', hlo, '--trace', db], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
        tb, _, nb = timed([a.bin, 'viz', db, '--before', os.path.join(work, 'b%s.svg' % s)])
        ta, _, na = timed([a.bin, 'viz', db, '--after', os.path.join(work, 'a%s.svg' % s)])
        page = os.path.join(work, 'report%s.html' % s)
        th, ch, nh = timed([a.bin, 'html', db, '-o', page] + mesh)
        size = os.path.getsize(page) / 1e6
        ms = ready_ms(page, work)
        m = re.search(r'<script type="application/json" id="data">\n(.*?)\n</script>',
                      open(page, encoding='utf-8').read(), re.S)
        trees = json.loads(m.group(1)).get('trees', {})
        view = 'whole graph'
        if 'after' in trees:
            t = trees['after']
            drawn = sum(1 for x in t['svg'] if x != -1)
            view = '%d boxes; %d groups, %d drawn' % (t['parent'].count(0), len(t['parent']), drawn)
        print('| %s | %d | %.2f | %.2f | %.2f (%.2f) | %.2f | %s | %s |' %
              (s, n, tb, ta, th, ch, size, ms, view))
        if a.screenshots:
            shoot(a, page, s, work)


def shoot(a, page, s, work):
    """report_S.png: the page's top; graph_S.png: the graph panel as it opens; select_S.png:
    after clicking the busiest collective (its group opened, its op selected) and searching the
    op with the longest origin chain (the selected-op panel below); group_S.png: the after
    view's busiest box opened; memory_S.png: the live-bytes chart."""
    os.makedirs(a.screenshots, exist_ok=True)
    screenshot(page, os.path.join(a.screenshots, 'report_%s.png' % s), work)
    text = open(page, encoding='utf-8').read()
    only = ('<style>main>section:not(#%s){display:none}#graph{height:%dpx}</style></head>')
    # click the busiest collective; then, when propagation set shardings, search the op whose
    # origin went through the most hops (the selected-op panel shows its chain)
    click_row = ("<script>(function(){var r=document.querySelector('#collectives tbody tr');"
                 "if(r)r.click();var D=JSON.parse(document.getElementById('data').textContent),"
                 "o=null;(D.origins||[]).forEach(function(x){if(!o||x[4].length>o[4].length)o=x;});"
                 "if(o){var s=document.getElementById('search');s.value=D.names[o[0]];"
                 "s.dispatchEvent(new Event('change'));}})();</script></body>")
    open_box = ("<script>(function(){var b=[].slice.call(document.querySelectorAll('#graph g.node'))"
                ".filter(function(n){var t=n.querySelector('title');return t&&/^h/.test(t.textContent)"
                "&&/sends/.test(n.textContent);})[0];if(b)b.dispatchEvent(new MouseEvent('click',"
                "{bubbles:true}));})();</script></body>")
    for name, panel, height, script in (('graph', 'graph-panel', 680, '</body>'),
                                        ('select', 'graph-panel', 400, click_row),
                                        ('group', 'graph-panel', 680, open_box),
                                        ('memory', 'memory-panel', 560, '</body>')):
        if name == 'group' and 'id="crumbs"' in text and '"trees":{}' in text:
            continue  # drawn whole: no box to open
        copy = os.path.join(work, '%s%s.html' % (name, s))
        t = text.replace('</head>', only % (panel, height), 1).replace('</body>', script, 1)
        open(copy, 'w', encoding='utf-8').write(t)
        screenshot(copy, os.path.join(a.screenshots, '%s_%s.png' % (name, s)), work)


if __name__ == '__main__':
    main()
