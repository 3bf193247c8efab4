// A modal dialog on the native <dialog> element: focus is trapped, Escape closes it.
import { useEffect, useId, useRef, type ReactNode } from "react";
import { createPortal } from "react-dom";
import { Icon } from "./icons";

interface Props {
  title: string;
  open: boolean;
  onClose: () => void;
  children: ReactNode;
  wide?: boolean;
  side?: boolean;
}

export function Dialog({ title, open, onClose, children, wide, side }: Props) {
  const ref = useRef<HTMLDialogElement>(null);
  const heading = useId();
  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    if (open && !dialog.open) dialog.showModal();
    if (!open && dialog.open) dialog.close();
  }, [open]);
  return createPortal(
    <dialog
      ref={ref}
      className={`dialog${wide ? " wide" : ""}${side ? " side" : ""}`}
      aria-labelledby={heading}
      onClose={onClose}
      onClick={(event) => {
        if (event.target === ref.current) onClose(); // a click on the backdrop
      }}
    >
      <div className="dialog-body">
        <header className="dialog-head">
          <h2 id={heading}>{title}</h2>
          <button type="button" className="icon" aria-label="Close" onClick={onClose}>
            <Icon name="close" />
          </button>
        </header>
        {open ? children : null}
      </div>
    </dialog>,
    document.body,
  );
}
