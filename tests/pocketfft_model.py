"""A transcription of pocketfft's real FFT (``rfftp``: radf2-5, radb2-5, the twiddle tables of
``sincos_2pibyn``), the algorithm scipy.fft runs for the 5-smooth lengths of the FFT tree.

It serves the error proof of :func:`optcomp._lattice.tree._fft_error` twice: run on floats it
must reproduce scipy.fft bit for bit (so the proof is about the code that runs), and run on
:class:`Tracked` values it measures the proof's constants -- the number of roundings along
every path through each butterfly (``butterfly_constant``) and that each exact pass is
sqrt(r) times an isometry in the half-complex norm.  Transcribed from pocketfft_hdronly.hpp
(scipy/pocketfft, C++ branch, as vendored by scipy 1.17); the operation order of every line
is kept, since it decides the roundings.
"""

from __future__ import annotations

import math

import numpy as np

LD = np.longdouble
_PI_LD = LD("3.141592653589793238462643383279502884197")


def constants(conv):
    """The pass constants, as pocketfft declares them (long-double literals cast to T0)."""
    return dict(taur=conv(-0.5), taui=conv(LD("0.8660254037844386467637231707529362")),
                hsqt2=conv(LD("0.707106781186547524400844362104849")),
                sqrt2=conv(LD("1.414213562373095048801688724209698")),
                tr11=conv(LD("0.3090169943749474241022934171828191")),
                ti11=conv(LD("0.9510565162951535721164393333793821")),
                tr12=conv(LD("-0.8090169943749474241022934171828191")),
                ti12=conv(LD("0.5877852522924731291687059546390728")))


class UnityRoots:
    """pocketfft's ``sincos_2pibyn``: e^(2 pi i idx / n) from two tables of cos/sin of angles
    <= pi/4, multiplied once (in double for T = double, in long double for long double)."""

    def __init__(self, n: int, dt):
        self.n, self.dt = n, dt
        self.cos, self.sin = (math.cos, math.sin) if dt is float else (np.cos, np.sin)
        self.ang = dt(LD("0.25") * _PI_LD / LD(n))
        nval = (n + 2) // 2
        shift = 1
        while (1 << shift) * (1 << shift) < nval:
            shift += 1
        self.shift, self.mask = shift, (1 << shift) - 1
        self.v1 = [(dt(1), dt(0))] + [self._calc(i) for i in range(1, self.mask + 1)]
        self.v2 = [(dt(1), dt(0))] + [self._calc(i * (self.mask + 1)) for i in range(1, (nval + self.mask) // (self.mask + 1))]

    def _calc(self, x: int):
        n, dt, ang = self.n, self.dt, self.ang
        c = lambda v: self.cos(dt(v) * ang)  # noqa: E731
        s = lambda v: self.sin(dt(v) * ang)  # noqa: E731
        x <<= 3
        if x < 4 * n:
            if x < 2 * n:
                return (c(x), s(x)) if x < n else (s(2 * n - x), c(2 * n - x))
            x -= 2 * n
            return (-s(x), c(x)) if x < n else (-c(2 * n - x), s(2 * n - x))
        x = 8 * n - x
        if x < 2 * n:
            return (c(x), -s(x)) if x < n else (s(2 * n - x), -c(2 * n - x))
        x -= 2 * n
        return (-s(x), -c(x)) if x < n else (-c(2 * n - x), -s(2 * n - x))

    def entries(self):
        """All table entries (each one cos/sin pair)."""
        return self.v1 + self.v2

    def __getitem__(self, idx: int):
        if 2 * idx <= self.n:
            x1, x2 = self.v1[idx & self.mask], self.v2[idx >> self.shift]
            return (x1[0] * x2[0] - x1[1] * x2[1], x1[0] * x2[1] + x1[1] * x2[0])
        idx = self.n - idx
        x1, x2 = self.v1[idx & self.mask], self.v2[idx >> self.shift]
        return (x1[0] * x2[0] - x1[1] * x2[1], -(x1[0] * x2[1] + x1[1] * x2[0]))


def factorize(n: int) -> list[int]:
    """rfftp::factorize: 4s, then one 2 (moved to the front), then odd factors."""
    f, m = [], n
    while m % 4 == 0:
        f.append(4)
        m //= 4
    if m % 2 == 0:
        m //= 2
        f.append(2)
        f[0], f[-1] = f[-1], f[0]
    d = 3
    while d * d <= m:
        while m % d == 0:
            f.append(d)
            m //= d
        d += 2
    if m > 1:
        f.append(m)
    return f


def twiddles(n: int, dt) -> list:
    """rfftp::comp_twiddle: per factor, the (re, im) twiddles w^(j l1 i) of its passes."""
    roots = UnityRoots(n, dt)
    out, l1 = [], 1
    fact = factorize(n)
    for k, ip in enumerate(fact):
        ido = n // (l1 * ip)
        tw = None
        if k < len(fact) - 1:
            tw = [None] * ((ip - 1) * (ido - 1))
            for j in range(1, ip):
                for i in range(1, (ido - 1) // 2 + 1):
                    tw[(j - 1) * (ido - 1) + 2 * i - 2], tw[(j - 1) * (ido - 1) + 2 * i - 1] = roots[j * l1 * i]
        out.append(tw)
        l1 *= ip
    return out


def PM(c, d):
    return c + d, c - d


def MULPM(c, d, e, f):
    """(a + i b) = conj(c + i d) (e + i f)."""
    return c * e + d * f, c * f - d * e


def _rearrange(rx, ix, ry, iy):
    t1, t2, t3, t4 = rx + ry, ry - rx, ix + iy, ix - iy
    return t1, t3, t4, t2


def radf2(ido, l1, cc, ch, wa, K, mulpm):
    CC = lambda a, b, c: cc[a + ido * (b + l1 * c)]  # noqa: E731
    WA = lambda x, i: wa[i + x * (ido - 1)]  # noqa: E731

    def CH(a, b, c, v):
        ch[a + ido * (b + 2 * c)] = v
    for k in range(l1):
        p, m = PM(CC(0, k, 0), CC(0, k, 1))
        CH(0, 0, k, p)
        CH(ido - 1, 1, k, m)
    if ido % 2 == 0:
        for k in range(l1):
            CH(0, 1, k, -CC(ido - 1, k, 1))
            CH(ido - 1, 0, k, CC(ido - 1, k, 0))
    if ido <= 2:
        return
    for k in range(l1):
        for i in range(2, ido, 2):
            ic = ido - i
            tr2, ti2 = mulpm(WA(0, i - 2), WA(0, i - 1), CC(i - 1, k, 1), CC(i, k, 1))
            p, m = PM(CC(i - 1, k, 0), tr2)
            CH(i - 1, 0, k, p)
            CH(ic - 1, 1, k, m)
            p, m = PM(ti2, CC(i, k, 0))
            CH(i, 0, k, p)
            CH(ic, 1, k, m)


def radf3(ido, l1, cc, ch, wa, K, mulpm):
    taur, taui = K["taur"], K["taui"]
    CC = lambda a, b, c: cc[a + ido * (b + l1 * c)]  # noqa: E731
    WA = lambda x, i: wa[i + x * (ido - 1)]  # noqa: E731

    def CH(a, b, c, v):
        ch[a + ido * (b + 3 * c)] = v
    for k in range(l1):
        cr2 = CC(0, k, 1) + CC(0, k, 2)
        CH(0, 0, k, CC(0, k, 0) + cr2)
        CH(0, 2, k, taui * (CC(0, k, 2) - CC(0, k, 1)))
        CH(ido - 1, 1, k, CC(0, k, 0) + taur * cr2)
    if ido == 1:
        return
    for k in range(l1):
        for i in range(2, ido, 2):
            ic = ido - i
            dr2, di2 = mulpm(WA(0, i - 2), WA(0, i - 1), CC(i - 1, k, 1), CC(i, k, 1))
            dr3, di3 = mulpm(WA(1, i - 2), WA(1, i - 1), CC(i - 1, k, 2), CC(i, k, 2))
            dr2, di2, dr3, di3 = _rearrange(dr2, di2, dr3, di3)
            CH(i - 1, 0, k, CC(i - 1, k, 0) + dr2)
            CH(i, 0, k, CC(i, k, 0) + di2)
            tr2 = CC(i - 1, k, 0) + taur * dr2
            ti2 = CC(i, k, 0) + taur * di2
            tr3 = taui * dr3
            ti3 = taui * di3
            p, m = PM(tr2, tr3)
            CH(i - 1, 2, k, p)
            CH(ic - 1, 1, k, m)
            p, m = PM(ti3, ti2)
            CH(i, 2, k, p)
            CH(ic, 1, k, m)


def radf4(ido, l1, cc, ch, wa, K, mulpm):
    hsqt2 = K["hsqt2"]
    CC = lambda a, b, c: cc[a + ido * (b + l1 * c)]  # noqa: E731
    WA = lambda x, i: wa[i + x * (ido - 1)]  # noqa: E731

    def CH(a, b, c, v):
        ch[a + ido * (b + 4 * c)] = v
    for k in range(l1):
        tr1, m = PM(CC(0, k, 3), CC(0, k, 1))
        CH(0, 2, k, m)
        tr2, m = PM(CC(0, k, 0), CC(0, k, 2))
        CH(ido - 1, 1, k, m)
        p, m = PM(tr2, tr1)
        CH(0, 0, k, p)
        CH(ido - 1, 3, k, m)
    if ido % 2 == 0:
        for k in range(l1):
            ti1 = (-hsqt2) * (CC(ido - 1, k, 1) + CC(ido - 1, k, 3))
            tr1 = hsqt2 * (CC(ido - 1, k, 1) - CC(ido - 1, k, 3))
            p, m = PM(CC(ido - 1, k, 0), tr1)
            CH(ido - 1, 0, k, p)
            CH(ido - 1, 2, k, m)
            p, m = PM(ti1, CC(ido - 1, k, 2))
            CH(0, 3, k, p)
            CH(0, 1, k, m)
    if ido <= 2:
        return
    for k in range(l1):
        for i in range(2, ido, 2):
            ic = ido - i
            cr2, ci2 = mulpm(WA(0, i - 2), WA(0, i - 1), CC(i - 1, k, 1), CC(i, k, 1))
            cr3, ci3 = mulpm(WA(1, i - 2), WA(1, i - 1), CC(i - 1, k, 2), CC(i, k, 2))
            cr4, ci4 = mulpm(WA(2, i - 2), WA(2, i - 1), CC(i - 1, k, 3), CC(i, k, 3))
            tr1, tr4 = PM(cr4, cr2)
            ti1, ti4 = PM(ci2, ci4)
            tr2, tr3 = PM(CC(i - 1, k, 0), cr3)
            ti2, ti3 = PM(CC(i, k, 0), ci3)
            p, m = PM(tr2, tr1)
            CH(i - 1, 0, k, p)
            CH(ic - 1, 3, k, m)
            p, m = PM(ti1, ti2)
            CH(i, 0, k, p)
            CH(ic, 3, k, m)
            p, m = PM(tr3, ti4)
            CH(i - 1, 2, k, p)
            CH(ic - 1, 1, k, m)
            p, m = PM(tr4, ti3)
            CH(i, 2, k, p)
            CH(ic, 1, k, m)


def radf5(ido, l1, cc, ch, wa, K, mulpm):
    tr11, ti11, tr12, ti12 = K["tr11"], K["ti11"], K["tr12"], K["ti12"]
    CC = lambda a, b, c: cc[a + ido * (b + l1 * c)]  # noqa: E731
    WA = lambda x, i: wa[i + x * (ido - 1)]  # noqa: E731

    def CH(a, b, c, v):
        ch[a + ido * (b + 5 * c)] = v
    for k in range(l1):
        cr2, ci5 = PM(CC(0, k, 4), CC(0, k, 1))
        cr3, ci4 = PM(CC(0, k, 3), CC(0, k, 2))
        CH(0, 0, k, CC(0, k, 0) + cr2 + cr3)
        CH(ido - 1, 1, k, CC(0, k, 0) + tr11 * cr2 + tr12 * cr3)
        CH(0, 2, k, ti11 * ci5 + ti12 * ci4)
        CH(ido - 1, 3, k, CC(0, k, 0) + tr12 * cr2 + tr11 * cr3)
        CH(0, 4, k, ti12 * ci5 - ti11 * ci4)
    if ido == 1:
        return
    for k in range(l1):
        for i in range(2, ido, 2):
            ic = ido - i
            dr2, di2 = mulpm(WA(0, i - 2), WA(0, i - 1), CC(i - 1, k, 1), CC(i, k, 1))
            dr3, di3 = mulpm(WA(1, i - 2), WA(1, i - 1), CC(i - 1, k, 2), CC(i, k, 2))
            dr4, di4 = mulpm(WA(2, i - 2), WA(2, i - 1), CC(i - 1, k, 3), CC(i, k, 3))
            dr5, di5 = mulpm(WA(3, i - 2), WA(3, i - 1), CC(i - 1, k, 4), CC(i, k, 4))
            dr2, di2, dr5, di5 = _rearrange(dr2, di2, dr5, di5)
            dr3, di3, dr4, di4 = _rearrange(dr3, di3, dr4, di4)
            CH(i - 1, 0, k, CC(i - 1, k, 0) + dr2 + dr3)
            CH(i, 0, k, CC(i, k, 0) + di2 + di3)
            tr2 = CC(i - 1, k, 0) + tr11 * dr2 + tr12 * dr3
            ti2 = CC(i, k, 0) + tr11 * di2 + tr12 * di3
            tr3 = CC(i - 1, k, 0) + tr12 * dr2 + tr11 * dr3
            ti3 = CC(i, k, 0) + tr12 * di2 + tr11 * di3
            tr5 = ti11 * dr5 + ti12 * dr4
            ti5 = ti11 * di5 + ti12 * di4
            tr4 = ti12 * dr5 - ti11 * dr4
            ti4 = ti12 * di5 - ti11 * di4
            p, m = PM(tr2, tr5)
            CH(i - 1, 2, k, p)
            CH(ic - 1, 1, k, m)
            p, m = PM(ti5, ti2)
            CH(i, 2, k, p)
            CH(ic, 1, k, m)
            p, m = PM(tr3, tr4)
            CH(i - 1, 4, k, p)
            CH(ic - 1, 3, k, m)
            p, m = PM(ti4, ti3)
            CH(i, 4, k, p)
            CH(ic, 3, k, m)


def radb2(ido, l1, cc, ch, wa, K, mulpm):
    CC = lambda a, b, c: cc[a + ido * (b + 2 * c)]  # noqa: E731
    WA = lambda x, i: wa[i + x * (ido - 1)]  # noqa: E731

    def CH(a, b, c, v):
        ch[a + ido * (b + l1 * c)] = v
    for k in range(l1):
        p, m = PM(CC(0, 0, k), CC(ido - 1, 1, k))
        CH(0, k, 0, p)
        CH(0, k, 1, m)
    if ido % 2 == 0:
        for k in range(l1):
            CH(ido - 1, k, 0, 2 * CC(ido - 1, 0, k))
            CH(ido - 1, k, 1, -2 * CC(0, 1, k))
    if ido <= 2:
        return
    for k in range(l1):
        for i in range(2, ido, 2):
            ic = ido - i
            p, tr2 = PM(CC(i - 1, 0, k), CC(ic - 1, 1, k))
            CH(i - 1, k, 0, p)
            ti2, p = PM(CC(i, 0, k), CC(ic, 1, k))
            CH(i, k, 0, p)
            a, b = mulpm(WA(0, i - 2), WA(0, i - 1), ti2, tr2)
            CH(i, k, 1, a)
            CH(i - 1, k, 1, b)


def radb3(ido, l1, cc, ch, wa, K, mulpm):
    taur, taui = K["taur"], K["taui"]
    CC = lambda a, b, c: cc[a + ido * (b + 3 * c)]  # noqa: E731
    WA = lambda x, i: wa[i + x * (ido - 1)]  # noqa: E731

    def CH(a, b, c, v):
        ch[a + ido * (b + l1 * c)] = v
    for k in range(l1):
        tr2 = 2 * CC(ido - 1, 1, k)
        cr2 = CC(0, 0, k) + taur * tr2
        CH(0, k, 0, CC(0, 0, k) + tr2)
        ci3 = (2 * taui) * CC(0, 2, k)
        p, m = PM(cr2, ci3)
        CH(0, k, 2, p)
        CH(0, k, 1, m)
    if ido == 1:
        return
    for k in range(l1):
        for i in range(2, ido, 2):
            ic = ido - i
            tr2 = CC(i - 1, 2, k) + CC(ic - 1, 1, k)
            ti2 = CC(i, 2, k) - CC(ic, 1, k)
            cr2 = CC(i - 1, 0, k) + taur * tr2
            ci2 = CC(i, 0, k) + taur * ti2
            CH(i - 1, k, 0, CC(i - 1, 0, k) + tr2)
            CH(i, k, 0, CC(i, 0, k) + ti2)
            cr3 = taui * (CC(i - 1, 2, k) - CC(ic - 1, 1, k))
            ci3 = taui * (CC(i, 2, k) + CC(ic, 1, k))
            dr3, dr2 = PM(cr2, ci3)
            di2, di3 = PM(ci2, cr3)
            a, b = mulpm(WA(0, i - 2), WA(0, i - 1), di2, dr2)
            CH(i, k, 1, a)
            CH(i - 1, k, 1, b)
            a, b = mulpm(WA(1, i - 2), WA(1, i - 1), di3, dr3)
            CH(i, k, 2, a)
            CH(i - 1, k, 2, b)


def radb4(ido, l1, cc, ch, wa, K, mulpm):
    sqrt2 = K["sqrt2"]
    CC = lambda a, b, c: cc[a + ido * (b + 4 * c)]  # noqa: E731
    WA = lambda x, i: wa[i + x * (ido - 1)]  # noqa: E731

    def CH(a, b, c, v):
        ch[a + ido * (b + l1 * c)] = v
    for k in range(l1):
        tr2, tr1 = PM(CC(0, 0, k), CC(ido - 1, 3, k))
        tr3 = 2 * CC(ido - 1, 1, k)
        tr4 = 2 * CC(0, 2, k)
        p, m = PM(tr2, tr3)
        CH(0, k, 0, p)
        CH(0, k, 2, m)
        p, m = PM(tr1, tr4)
        CH(0, k, 3, p)
        CH(0, k, 1, m)
    if ido % 2 == 0:
        for k in range(l1):
            ti1, ti2 = PM(CC(0, 3, k), CC(0, 1, k))
            tr2, tr1 = PM(CC(ido - 1, 0, k), CC(ido - 1, 2, k))
            CH(ido - 1, k, 0, tr2 + tr2)
            CH(ido - 1, k, 1, sqrt2 * (tr1 - ti1))
            CH(ido - 1, k, 2, ti2 + ti2)
            CH(ido - 1, k, 3, (-sqrt2) * (tr1 + ti1))
    if ido <= 2:
        return
    for k in range(l1):
        for i in range(2, ido, 2):
            ic = ido - i
            tr2, tr1 = PM(CC(i - 1, 0, k), CC(ic - 1, 3, k))
            ti1, ti2 = PM(CC(i, 0, k), CC(ic, 3, k))
            tr4, ti3 = PM(CC(i, 2, k), CC(ic, 1, k))
            tr3, ti4 = PM(CC(i - 1, 2, k), CC(ic - 1, 1, k))
            p, cr3 = PM(tr2, tr3)
            CH(i - 1, k, 0, p)
            p, ci3 = PM(ti2, ti3)
            CH(i, k, 0, p)
            cr4, cr2 = PM(tr1, tr4)
            ci2, ci4 = PM(ti1, ti4)
            for j, (ci, cr) in enumerate(((ci2, cr2), (ci3, cr3), (ci4, cr4))):
                a, b = mulpm(WA(j, i - 2), WA(j, i - 1), ci, cr)
                CH(i, k, j + 1, a)
                CH(i - 1, k, j + 1, b)


def radb5(ido, l1, cc, ch, wa, K, mulpm):
    tr11, ti11, tr12, ti12 = K["tr11"], K["ti11"], K["tr12"], K["ti12"]
    CC = lambda a, b, c: cc[a + ido * (b + 5 * c)]  # noqa: E731
    WA = lambda x, i: wa[i + x * (ido - 1)]  # noqa: E731

    def CH(a, b, c, v):
        ch[a + ido * (b + l1 * c)] = v
    for k in range(l1):
        ti5 = CC(0, 2, k) + CC(0, 2, k)
        ti4 = CC(0, 4, k) + CC(0, 4, k)
        tr2 = CC(ido - 1, 1, k) + CC(ido - 1, 1, k)
        tr3 = CC(ido - 1, 3, k) + CC(ido - 1, 3, k)
        CH(0, k, 0, CC(0, 0, k) + tr2 + tr3)
        cr2 = CC(0, 0, k) + tr11 * tr2 + tr12 * tr3
        cr3 = CC(0, 0, k) + tr12 * tr2 + tr11 * tr3
        ci5, ci4 = MULPM(ti5, ti4, ti11, ti12)
        p, m = PM(cr2, ci5)
        CH(0, k, 4, p)
        CH(0, k, 1, m)
        p, m = PM(cr3, ci4)
        CH(0, k, 3, p)
        CH(0, k, 2, m)
    if ido == 1:
        return
    for k in range(l1):
        for i in range(2, ido, 2):
            ic = ido - i
            tr2, tr5 = PM(CC(i - 1, 2, k), CC(ic - 1, 1, k))
            ti5, ti2 = PM(CC(i, 2, k), CC(ic, 1, k))
            tr3, tr4 = PM(CC(i - 1, 4, k), CC(ic - 1, 3, k))
            ti4, ti3 = PM(CC(i, 4, k), CC(ic, 3, k))
            CH(i - 1, k, 0, CC(i - 1, 0, k) + tr2 + tr3)
            CH(i, k, 0, CC(i, 0, k) + ti2 + ti3)
            cr2 = CC(i - 1, 0, k) + tr11 * tr2 + tr12 * tr3
            ci2 = CC(i, 0, k) + tr11 * ti2 + tr12 * ti3
            cr3 = CC(i - 1, 0, k) + tr12 * tr2 + tr11 * tr3
            ci3 = CC(i, 0, k) + tr12 * ti2 + tr11 * ti3
            cr5, cr4 = MULPM(tr5, tr4, ti11, ti12)  # butterfly constants, not twiddles
            ci5, ci4 = MULPM(ti5, ti4, ti11, ti12)
            dr4, dr3 = PM(cr3, ci4)
            di3, di4 = PM(ci3, cr4)
            dr5, dr2 = PM(cr2, ci5)
            di2, di5 = PM(ci2, cr5)
            for j, (di, dr) in enumerate(((di2, dr2), (di3, dr3), (di4, dr4), (di5, dr5))):
                a, b = mulpm(WA(j, i - 2), WA(j, i - 1), di, dr)
                CH(i, k, j + 1, a)
                CH(i - 1, k, j + 1, b)


FORWARD = {2: radf2, 3: radf3, 4: radf4, 5: radf5}
BACKWARD = {2: radb2, 3: radb3, 4: radb4, 5: radb5}


def rfftp(values: list, forward: bool, dt, fct=None) -> list:
    """rfftp::exec on a list of n values (numbers, or numpy arrays: one transform per
    element), forward (r2hc) or backward, then the product by ``fct`` if given."""
    n = len(values)
    fact = factorize(n)
    K = constants(dt)
    tw = twiddles(n, dt)
    p1, p2 = list(values), [None] * n
    if forward:
        l1 = n
        for k in range(len(fact) - 1, -1, -1):
            ip = fact[k]
            ido = n // l1
            l1 //= ip
            FORWARD[ip](ido, l1, p1, p2, tw[k], K, MULPM)
            p1, p2 = p2, p1
    else:
        l1 = 1
        for k, ip in enumerate(fact):
            ido = n // (ip * l1)
            BACKWARD[ip](ido, l1, p1, p2, tw[k], K, MULPM)
            p1, p2 = p2, p1
            l1 *= ip
    if fct is not None:
        p1 = [fct * v for v in p1]
    return p1


def packed(spectrum: np.ndarray, n: int) -> np.ndarray:
    """scipy's rfft output (..., n // 2 + 1) in FFTPACK's half-complex order (..., n)."""
    parts = [spectrum[..., :1].real]
    for k in range(1, (n + 1) // 2):
        parts += [spectrum[..., k:k + 1].real, spectrum[..., k:k + 1].imag]
    if n % 2 == 0:
        parts.append(spectrum[..., n // 2:n // 2 + 1].real)
    return np.concatenate(parts, axis=-1)


# ----------------------------------------------------------------------- path analysis


class Constant:
    """A pass constant: its exact value and whether the stored one is rounded."""

    def __init__(self, exact: float, rounded: bool):
        self.exact, self.rounded = exact, rounded

    def __neg__(self):
        return Constant(-self.exact, self.rounded)

    def __mul__(self, other):
        if isinstance(other, Tracked):
            return other.scaled(self)
        return Constant(self.exact * other, self.rounded)  # 2 * taui: exact product by 2

    __rmul__ = __mul__


class Tracked:
    """A linear form in the pass inputs: ``lin`` its exact coefficients, ``paths[(j, d)]``
    the summed |coefficients| of its paths from input j that carry d roundings."""

    def __init__(self, paths: dict, lin: dict):
        self.paths, self.lin = paths, lin

    @staticmethod
    def leaf(j: int) -> "Tracked":
        return Tracked({(j, 0): 1.0}, {j: 1.0})

    def _combine(self, other: "Tracked", sign: float) -> "Tracked":
        paths = {}
        for src in (self.paths, other.paths):  # one rounding more on every path
            for (j, d), c in src.items():
                paths[(j, d + 1)] = paths.get((j, d + 1), 0.0) + c
        lin = dict(self.lin)
        for j, c in other.lin.items():
            lin[j] = lin.get(j, 0.0) + sign * c
        return Tracked(paths, lin)

    def __add__(self, other):
        return self._combine(other, 1.0)

    def __sub__(self, other):
        return self._combine(other, -1.0)

    def __neg__(self):
        return Tracked(dict(self.paths), {j: -c for j, c in self.lin.items()})

    def scaled(self, c: Constant) -> "Tracked":
        # a rounded constant: its representation error and the product's rounding; an exact
        # power of two (-1/2, 2): no rounding (underflow aside, see _fft_error)
        inc = 2 if c.rounded else (0 if abs(c.exact) in (0.5, 1.0, 2.0) else 1)
        return Tracked({(j, d + inc): v * abs(c.exact) for (j, d), v in self.paths.items()},
                       {j: v * c.exact for j, v in self.lin.items()})

    def __mul__(self, other):
        return self.scaled(other if isinstance(other, Constant) else Constant(other, False))

    __rmul__ = __mul__


def exact_constants() -> dict:
    s3, c1, s1, c2, s2 = math.sqrt(3) / 2, math.cos(2 * math.pi / 5), math.sin(2 * math.pi / 5), \
        math.cos(4 * math.pi / 5), math.sin(4 * math.pi / 5)
    return dict(taur=Constant(-0.5, False), taui=Constant(s3, True), hsqt2=Constant(math.sqrt(0.5), True),
                sqrt2=Constant(math.sqrt(2.0), True), tr11=Constant(c1, True), ti11=Constant(s1, True),
                tr12=Constant(c2, True), ti12=Constant(s2, True))


class _Twiddle:
    """A twiddle slot: a product with it is a fresh input of the butterflies (its error is
    charged separately as tau)."""


def _weights(n: int, block: int) -> np.ndarray:
    """Half-complex weights: 1 on a real entry (column 0, and column block-1 of an even
    block), 2 on each member of a (re, im) pair."""
    p = np.arange(n) % block
    return np.where((p == 0) | ((block % 2 == 0) & (p == block - 1)), 1.0, 2.0)


def butterfly_constant(ip: int, ido: int, forward: bool) -> tuple[float, np.ndarray]:
    """(beta, singular values) of one pass of radix ``ip`` (l1 = 1, ``ido`` columns):
    beta = ||W_out (sum_d d P_d) W_in^-1||_2 / sqrt(ip), the first-order butterfly error
    factor in units of u (twiddle products taken as exact inputs), and the singular values
    of W_out A W_in^-1 (A the exact pass): all sqrt(ip) if the pass is sqrt(ip) times an
    isometry of the half-complex norm."""
    n = ip * ido
    cc = [Tracked.leaf(a) for a in range(n)]
    ch = [None] * n
    wa = [_Twiddle() for _ in range((ip - 1) * (ido - 1))]

    def mulpm(c, d, e, f):
        if not isinstance(c, _Twiddle):  # radb5's products by its constants
            return MULPM(c, d, e, f)
        if forward:  # the twiddled inputs replace the inputs at their own positions
            return Tracked.leaf(next(iter(e.lin))), Tracked.leaf(next(iter(f.lin)))
        return e, f  # backward: the butterfly outputs, before their twiddle product

    (FORWARD if forward else BACKWARD)[ip](ido, 1, cc, ch, wa, exact_constants(), mulpm)
    w_in = _weights(n, ido if forward else n)
    w_out = _weights(n, n if forward else ido)
    A = np.zeros((n, n))
    E = np.zeros((n, n))
    for o, v in enumerate(ch):
        for j, c in v.lin.items():
            A[o, j] += c
        for (j, d), c in v.paths.items():
            E[o, j] += d * c
    scale = np.sqrt(w_out)[:, None] / np.sqrt(w_in)[None, :]
    beta = float(np.linalg.norm(E * scale, 2)) / math.sqrt(ip)
    return beta, np.linalg.svd(A * scale, compute_uv=False)
