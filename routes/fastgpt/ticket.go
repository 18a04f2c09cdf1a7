package fastgpt

import (
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Claims are the fields FastGPT's getTicket signs into a ticket (camelCase, as jsonwebtoken writes them).
type Claims struct {
	SourceType string `json:"sourceType"`
	SourceID   string `json:"sourceId"`
	UserID     string `json:"userId"`
	ChatID     string `json:"chatId"`
	TeamID     string `json:"teamId"`
	Channel    string `json:"channel"`
	Permission string `json:"permission"`
	jwt.RegisteredClaims
}

const ticketLeeway = 5 * time.Second

// parseTicket checks a ticket locally: HS256 with the secret's bytes, exp required with 5 s leeway.
func parseTicket(secret []byte, ticket string) (*Claims, error) {
	claims := new(Claims)
	_, err := jwt.ParseWithClaims(ticket, claims, func(*jwt.Token) (any, error) { return secret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(ticketLeeway),
	)
	if err != nil {
		return nil, fmt.Errorf("checking ticket: %w", err)
	}
	if claims.Channel == "" || claims.Permission == "" {
		return nil, errors.New("checking ticket: channel and permission claims are required")
	}
	return claims, nil
}

// authorize applies the route rules: the ticket's channel is the route, and a terminal needs write permission.
func (c *Claims) authorize(channel string) error {
	if c.Channel != channel {
		return fmt.Errorf("ticket is for channel %q, not %q", c.Channel, channel)
	}
	if channel == channelTerminal && c.Permission != "write" {
		return errors.New("terminal requires write permission")
	}
	return nil
}

// keepaliveBody is what the keepalive call sends, taken from the claims.
func (c *Claims) keepaliveBody() map[string]string {
	return map[string]string{
		"sourceType": c.SourceType,
		"sourceId":   c.SourceID,
		"userId":     c.UserID,
		"chatId":     c.ChatID,
		"teamId":     c.TeamID,
	}
}
