package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Files beside tokenizer.json that Config reads.
const (
	ConfigFile           = "tokenizer_config.json"
	GenerationConfigFile = "generation_config.json"
)

// Config is what a checkpoint says about generating with its tokenizer.
type Config struct {
	// EOS are the end-of-sequence ids: tokenizer_config.json's eos_token
	// and generation_config.json's eos_token_id (a number or a list), in
	// that order, without repeats.
	EOS []int
	// ChatTemplate is tokenizer_config.json's chat_template ("" if none;
	// the one named "default" when it is a list).
	ChatTemplate string
	// Sources names the files read, for messages.
	Sources []string
}

// LoadConfig reads dir's tokenizer_config.json and generation_config.json
// (each optional) for tokenizer t.
func LoadConfig(dir string, t *Tokenizer) (Config, error) {
	var c Config
	add := func(id int) {
		for _, e := range c.EOS {
			if e == id {
				return
			}
		}
		c.EOS = append(c.EOS, id)
	}
	path := filepath.Join(dir, ConfigFile)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return c, err
	default:
		var tc struct {
			EOS          json.RawMessage `json:"eos_token"`
			ChatTemplate json.RawMessage `json:"chat_template"`
		}
		if err := json.Unmarshal(data, &tc); err != nil {
			return c, fmt.Errorf("%s: %v", path, err)
		}
		c.Sources = append(c.Sources, path)
		if eos, err := tokenString(tc.EOS); err != nil {
			return c, fmt.Errorf("%s: eos_token: %v", path, err)
		} else if eos != "" {
			id, ok := t.ID(eos)
			if !ok {
				return c, fmt.Errorf("%s: eos_token %q is not a token of the tokenizer", path, eos)
			}
			add(id)
		}
		if c.ChatTemplate, err = chatTemplate(tc.ChatTemplate); err != nil {
			return c, fmt.Errorf("%s: chat_template: %v", path, err)
		}
	}
	path = filepath.Join(dir, GenerationConfigFile)
	data, err = os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return c, err
	default:
		var gc struct {
			EOS json.RawMessage `json:"eos_token_id"`
		}
		if err := json.Unmarshal(data, &gc); err != nil {
			return c, fmt.Errorf("%s: %v", path, err)
		}
		c.Sources = append(c.Sources, path)
		ids, err := intOrList(gc.EOS)
		if err != nil {
			return c, fmt.Errorf("%s: eos_token_id: %v", path, err)
		}
		for _, id := range ids {
			add(id)
		}
	}
	return c, nil
}

// tokenString reads a special token of tokenizer_config.json: a string,
// an object with "content" (older files), or null.
func tokenString(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var o struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return "", fmt.Errorf("neither a string nor an object with content")
	}
	return o.Content, nil
}

func chatTemplate(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", fmt.Errorf("neither a string nor a list of named templates")
	}
	for _, n := range named {
		if n.Name == "default" {
			return n.Template, nil
		}
	}
	return "", fmt.Errorf("no template named default among %d", len(named))
}

func intOrList(raw json.RawMessage) ([]int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one int
	if err := json.Unmarshal(raw, &one); err == nil {
		return []int{one}, nil
	}
	var list []int
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("neither a number nor a list of numbers")
	}
	return list, nil
}

// ChatML tokens: the turn markers of Qwen's chat template.
const (
	IMStart = "<|im_start|>"
	IMEnd   = "<|im_end|>"
)

// ChatML returns the prompt Qwen's chat template makes of one user
// message with add_generation_prompt:
//
//	<|im_start|>user\n{message}<|im_end|>\n<|im_start|>assistant\n
//
// It fails when t lacks the ChatML tokens or when the checkpoint's
// template (c.ChatTemplate, when set) is not a ChatML one.
func (c Config) ChatML(t *Tokenizer, message string) (string, error) {
	for _, s := range []string{IMStart, IMEnd} {
		if _, ok := t.ID(s); !ok {
			return "", fmt.Errorf("the tokenizer has no %s token: it does not use ChatML", s)
		}
	}
	if c.ChatTemplate != "" && !strings.Contains(c.ChatTemplate, IMStart) {
		return "", fmt.Errorf("the chat template of %s does not use %s; tcc applies ChatML templates only", ConfigFile, IMStart)
	}
	return IMStart + "user\n" + message + IMEnd + "\n" + IMStart + "assistant\n", nil
}
