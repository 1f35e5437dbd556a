"""csource.py — C source text with its comments and literals blanked (newlines kept), so that
braces, identifiers and directives can be matched by the check scripts in this folder."""
import re


def strip(text):
    """Comments, string and character literals blanked; newlines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        elif text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i))
            i = j
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c and text[j] != '\n':
                j += 2 if text[j] == '\\' else 1
            out.append(c + re.sub(r'[^\n]', ' ', text[i + 1:j]) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def strip_directives(text):
    """strip(), and the preprocessor lines (with their continuations) blanked too."""
    lines, cont = strip(text).split('\n'), False
    for k, line in enumerate(lines):
        if cont or line.lstrip().startswith('#'):
            cont = line.rstrip().endswith('\\')
            lines[k] = ''
    return '\n'.join(lines)
