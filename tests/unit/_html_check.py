"""HTML checks shared by the report tests: a parser that checks nesting, and the
self-containment rules (no external resource, no event handler, internal links resolve)."""

from __future__ import annotations

from html.parser import HTMLParser

VOID = {"meta", "br", "hr", "img", "input", "link", "wbr", "col", "area", "base", "source"}
EXTERNAL_TAGS = {
    "link",
    "img",
    "iframe",
    "object",
    "embed",
    "base",
    "audio",
    "video",
    "source",
    "frame",
}
RESOURCE_ATTRS = {
    "src",
    "srcset",
    "action",
    "formaction",
    "poster",
    "data",
    "background",
    "xlink:href",
}


class Page(HTMLParser):
    """Parses a page and checks that its elements nest properly."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.scripts: list[str] = []
        self.styles: list[str] = []
        self.text: list[str] = []
        self.feed(text)
        self.close()
        if self.stack:
            self.errors.append(f"unclosed: {self.stack}")

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:]}")
            return
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        if self.stack and self.stack[-1] == "script":
            self.scripts.append(data)
        elif self.stack and self.stack[-1] == "style":
            self.styles.append(data)
        else:
            self.text.append(data)

    def ids(self) -> set[str]:
        return {a["id"] for _, a in self.tags if a.get("id")}  # type: ignore[misc]

    def with_class(self, tag: str, cls: str) -> list[dict[str, str | None]]:
        return [a for t, a in self.tags if t == tag and cls in (a.get("class") or "").split()]


def assert_self_contained(page_text: str, *, allow_urls_in_text: bool = False) -> Page:
    page = Page(page_text)
    assert page.errors == []
    assert page_text.startswith("<!DOCTYPE html>")
    for tag, attrs in page.tags:
        assert tag not in EXTERNAL_TAGS, tag
        assert not RESOURCE_ATTRS & set(attrs), (tag, attrs)
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        if "href" in attrs:
            assert (attrs["href"] or "").startswith("#"), attrs
        if "style" in attrs:
            assert "url(" not in (attrs["style"] or "")
    assert [t for t, _ in page.tags].count("script") == 1
    assert all("src" not in a for t, a in page.tags if t == "script")
    assert all("url(" not in s and "@import" not in s for s in page.styles)
    assert all("http" not in s and "fetch(" not in s for s in page.scripts)
    if not allow_urls_in_text:
        assert "http://" not in page_text and "https://" not in page_text
    # every internal link points at an element of the page
    ids = page.ids()
    for _, attrs in page.tags:
        href = attrs.get("href")
        if href:
            assert href[1:] in ids, href
    return page
