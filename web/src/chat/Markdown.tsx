// Answers are untrusted text (docs/security.md): Markdown is rendered without raw HTML, through
// rehype-sanitize (GitHub's allowlist), links only to http(s)/mailto, and no image is ever
// loaded (an image shows as its alt text with a link), so nothing leaves the page by itself.
import { createContext, memo, useContext, useMemo, type ReactNode } from "react";
import Markdown, { type Components } from "react-markdown";
import rehypeSanitize from "rehype-sanitize";
import remarkGfm from "remark-gfm";
import type { Citation } from "./run";
import { CitationChip } from "./CitationChip";

const SAFE_PROTOCOL = /^(https?:|mailto:)/i;
const CITE = /\[(\d{1,3})\]/g;
const HAS_CITE = /\[\d{1,3}\]/;
const CITE_HREF = /^#cite-(\d{1,3})$/;

/** Keep only http(s) and mailto URLs and our citation anchors; anything else becomes "". */
export function safeUrl(url: string): string {
  const trimmed = url.trim();
  if (CITE_HREF.test(trimmed)) return trimmed;
  return SAFE_PROTOCOL.test(trimmed) ? trimmed : "";
}

interface Node {
  type: string;
  value?: string;
  url?: string;
  children?: Node[];
}

/** A remark plugin: `[n]` markers become citation anchors; markers with no citation vanish. */
function remarkCitations(known: ReadonlySet<number>) {
  const split = (value: string): Node[] => {
    const out: Node[] = [];
    let at = 0;
    for (const match of value.matchAll(CITE)) {
      const index = match.index ?? 0;
      if (index > at) out.push({ type: "text", value: value.slice(at, index) });
      const number = Number(match[1]);
      if (known.has(number)) {
        const label: Node = { type: "text", value: String(number) };
        out.push({ type: "link", url: `#cite-${number}`, children: [label] });
      }
      at = index + match[0].length;
    }
    if (at < value.length) out.push({ type: "text", value: value.slice(at) });
    return out;
  };
  const walk = (node: Node): void => {
    if (!node.children || node.type === "link" || node.type === "linkReference") return;
    node.children = node.children.flatMap((child) => {
      if (child.type === "text" && child.value && HAS_CITE.test(child.value)) {
        return split(child.value);
      }
      walk(child);
      return [child];
    });
  };
  return () => (tree: Node) => walk(tree);
}

function withDir(tag: "p" | "li" | "h1" | "h2" | "h3" | "h4" | "blockquote" | "td" | "th") {
  return ({ children }: { children?: ReactNode }) => {
    const Tag = tag;
    return <Tag dir="auto">{children}</Tag>;
  };
}

interface Props {
  text: string;
  citations: Citation[];
}

// The renderers are module-level, so a re-render (new citations, the stored answer replacing the
// streamed one) keeps every chip mounted, with its hover, focus and dismissed state; they read
// the answer's citations from this context.
const Citations = createContext<ReadonlyMap<number, Citation>>(new Map());

function CiteOrLink({ href, children }: { href?: string; children?: ReactNode }) {
  const byNumber = useContext(Citations);
  const cite = href ? CITE_HREF.exec(href) : null;
  if (cite) {
    const citation = byNumber.get(Number(cite[1]));
    return citation ? <CitationChip citation={citation} /> : null;
  }
  if (!href) return <span>{children}</span>;
  return (
    <a href={href} target="_blank" rel="noopener noreferrer nofollow">
      {children}
    </a>
  );
}

function ImageAsLink({ alt, src }: { alt?: string; src?: unknown }) {
  const url = src ? safeUrl(String(src)) : "";
  const label = `image: ${alt || "untitled"}`;
  return url ? (
    <a href={url} target="_blank" rel="noopener noreferrer nofollow" className="image-link">
      [{label}]
    </a>
  ) : (
    <span className="image-link">[{label}]</span>
  );
}

const COMPONENTS: Components = {
  a: CiteOrLink,
  img: ImageAsLink,
  p: withDir("p"),
  li: withDir("li"),
  h1: withDir("h3"),
  h2: withDir("h3"),
  h3: withDir("h4"),
  blockquote: withDir("blockquote"),
  td: withDir("td"),
  th: withDir("th"),
};

function AnswerMarkdownImpl({ text, citations }: Props) {
  const byNumber = useMemo(() => new Map(citations.map((c) => [c.number, c])), [citations]);
  return (
    <div className="markdown">
      <Citations.Provider value={byNumber}>
        <Markdown
          remarkPlugins={[remarkGfm, remarkCitations(new Set(byNumber.keys()))]}
          rehypePlugins={[rehypeSanitize]}
          urlTransform={safeUrl}
          skipHtml
          components={COMPONENTS}
        >
          {text}
        </Markdown>
      </Citations.Provider>
    </div>
  );
}

export const AnswerMarkdown = memo(AnswerMarkdownImpl);
